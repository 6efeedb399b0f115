-- The day's model usage replicas share, so that a daily token budget is
-- one budget for all of them. One row per UTC day, call kind, model and
-- owner (repo and user_id are '' where a call names none), to which each
-- replica adds what it spent: the sums only grow within a day.

CREATE TABLE engram_usage (
    day                date NOT NULL,
    kind               text NOT NULL,
    model              text NOT NULL,
    repo               text NOT NULL,
    user_id            text NOT NULL,
    calls              bigint NOT NULL CHECK (calls >= 0),
    prompt_tokens      bigint NOT NULL CHECK (prompt_tokens >= 0),
    completion_tokens  bigint NOT NULL CHECK (completion_tokens >= 0),
    estimated_calls    bigint NOT NULL CHECK (estimated_calls >= 0),
    PRIMARY KEY (day, kind, model, repo, user_id)
);
