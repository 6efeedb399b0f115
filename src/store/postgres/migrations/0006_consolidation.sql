-- Consolidation: the memory a pass kept in a memory's place (part of its
-- lifecycle, which changes without a new version), and the passes
-- themselves, each with the changes it made and which were undone.

ALTER TABLE engram_memories
    ADD COLUMN superseded_by uuid;

CREATE TABLE engram_consolidations (
    id         uuid PRIMARY KEY,
    scope      text NOT NULL CHECK (scope IN ('repo', 'user')),
    owner      text NOT NULL,
    at         timestamptz NOT NULL,
    document   jsonb NOT NULL
);

CREATE INDEX engram_consolidations_by_namespace
    ON engram_consolidations (scope, owner, id DESC);
