-- The capture queue replicas share, and the ledger of classified messages.

-- One row per accepted trigger, until its memories are written (the row is
-- deleted) or it fails for good (failed_at is set; it stays for the
-- operator). seq is the order of acceptance: a pair's triggers are claimed
-- in that order, one at a time. A claim is (claimed_by, claim,
-- lease_until); a claim whose lease has passed is free to take again.
CREATE TABLE engram_triggers (
    id           uuid PRIMARY KEY,
    seq          bigserial NOT NULL UNIQUE,
    kind         text NOT NULL CHECK (kind IN ('turn', 'compaction')),
    repo         text NOT NULL,
    user_id      text NOT NULL,
    session_id   text NOT NULL,
    body         text NOT NULL,
    bytes        bigint NOT NULL CHECK (bytes >= 0),
    attempts     integer NOT NULL DEFAULT 0,
    last_error   text,
    not_before   timestamptz,
    claimed_by   text,
    claim        uuid,
    lease_until  timestamptz,
    failed_at    timestamptz
);

CREATE INDEX engram_triggers_pair ON engram_triggers (repo, user_id, seq)
    WHERE failed_at IS NULL;
CREATE INDEX engram_triggers_failed ON engram_triggers (seq)
    WHERE failed_at IS NOT NULL;

-- Per session, the fingerprints of the messages already classified.
CREATE TABLE engram_classified (
    repo         text NOT NULL,
    user_id      text NOT NULL,
    session_id   text NOT NULL,
    marks        jsonb NOT NULL,
    updated_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (repo, user_id, session_id)
);
