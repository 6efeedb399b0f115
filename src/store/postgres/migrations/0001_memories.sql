-- Memories, and the append-only log of changes to them that replicas follow.

CREATE TABLE engram_memories (
    id          uuid PRIMARY KEY,
    scope       text NOT NULL CHECK (scope IN ('repo', 'user')),
    owner       text NOT NULL,
    version     bigint NOT NULL CHECK (version >= 1),
    category    text NOT NULL,
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL,
    supersedes  uuid,
    related     jsonb NOT NULL DEFAULT '[]',
    importance  double precision,
    session_id  text,
    trigger     text NOT NULL,
    content     text NOT NULL
);

CREATE INDEX engram_memories_namespace ON engram_memories (scope, owner);
CREATE INDEX engram_memories_supersedes ON engram_memories (supersedes)
    WHERE supersedes IS NOT NULL;

-- One row per write or delete, numbered 1, 2, 3... with no gaps: the number
-- comes from engram_log_head, whose one row each writing transaction locks
-- until it commits, so numbers are handed out in commit order and a reader
-- that has seen n has seen everything before n.
CREATE TABLE engram_changes (
    seq         bigint PRIMARY KEY,
    memory_id   uuid NOT NULL,
    scope       text NOT NULL,
    owner       text NOT NULL,
    kind        text NOT NULL CHECK (kind IN ('write', 'delete')),
    at          timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE engram_log_head (
    singleton   boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    seq         bigint NOT NULL
);
INSERT INTO engram_log_head (singleton, seq) VALUES (true, 0);
