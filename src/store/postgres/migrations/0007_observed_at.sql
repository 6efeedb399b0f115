-- When a memory's fact was said or became true, when that is not when the
-- version was written (NULL: its created_at). Part of the version.

ALTER TABLE engram_memories
    ADD COLUMN observed_at timestamptz;
