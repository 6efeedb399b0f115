-- What in a repo a memory is about, and the commit it was written at
-- (front-matter `anchors` and `commit`; `commit` is a keyword in SQL).

ALTER TABLE engram_memories
    ADD COLUMN anchors   jsonb NOT NULL DEFAULT '[]',
    ADD COLUMN commit_id text;
