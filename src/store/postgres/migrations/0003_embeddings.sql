-- The embedding cache replicas share: a text is embedded once for all of
-- them. Keyed by the embedding model's key and the SHA-256 of the text;
-- the vector is its floats, little-endian. Derived data: safe to empty.

CREATE TABLE engram_embeddings (
    model       text NOT NULL,
    text_hash   bytea NOT NULL CHECK (octet_length(text_hash) = 32),
    vector      bytea NOT NULL CHECK (octet_length(vector) > 0 AND octet_length(vector) % 4 = 0),
    PRIMARY KEY (model, text_hash)
);
