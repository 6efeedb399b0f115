-- Memory over time: what in a repo a memory is about and the commit it
-- was written at (front-matter `anchors` and `commit`; `commit` is a
-- keyword in SQL), and its lifecycle, which changes without a new
-- version (`used_at`: when it was last retrieved, confirmed, kept or
-- restored, what retention measures disuse from).

ALTER TABLE engram_memories
    ADD COLUMN anchors       jsonb NOT NULL DEFAULT '[]',
    ADD COLUMN commit_id     text,
    ADD COLUMN validity      text NOT NULL DEFAULT 'unverified'
        CHECK (validity IN ('current', 'changed', 'gone', 'unverified')),
    ADD COLUMN checked_at    timestamptz,
    ADD COLUMN checked_commit text,
    ADD COLUMN confidence    text NOT NULL DEFAULT 'confirmed'
        CHECK (confidence IN ('provisional', 'confirmed')),
    ADD COLUMN needs_review  boolean NOT NULL DEFAULT false,
    ADD COLUMN review_reason text,
    ADD COLUMN archived      boolean NOT NULL DEFAULT false,
    ADD COLUMN used_at       timestamptz;
