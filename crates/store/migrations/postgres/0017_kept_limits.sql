-- What a caller keeps is counted and bounded: an object's size (its
-- content whole or in chunks) and end user's tag (erased with them); a
-- file's content in chunks written as the upload arrives (never held
-- whole), found once its object is put; a batch staged in parts and opened
-- once whole, with its lines' bytes. Owners take turns at the queue, and
-- a line refused for a moment waits out its not-before time in the queue,
-- never in a worker's slot.
ALTER TABLE kept_objects ADD COLUMN size BIGINT NOT NULL DEFAULT 0;
ALTER TABLE kept_objects ADD COLUMN chunks INTEGER NOT NULL DEFAULT 0;
ALTER TABLE kept_objects ADD COLUMN user_tag TEXT;
UPDATE kept_objects SET size = octet_length(body);
CREATE INDEX kept_objects_owner ON kept_objects (owner);
CREATE INDEX kept_objects_user ON kept_objects (user_tag) WHERE user_tag IS NOT NULL;

CREATE TABLE kept_chunks (
    kind TEXT NOT NULL,
    owner TEXT NOT NULL,
    id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    at_ms BIGINT NOT NULL,
    data BYTEA NOT NULL,
    PRIMARY KEY (kind, owner, id, seq)
);
CREATE INDEX kept_chunks_at ON kept_chunks (at_ms);

ALTER TABLE batches ADD COLUMN staged BOOLEAN NOT NULL DEFAULT FALSE;
ALTER TABLE batches ADD COLUMN bytes BIGINT NOT NULL DEFAULT 0;
UPDATE batches SET bytes = (SELECT COALESCE(SUM(octet_length(body)), 0) FROM batch_lines WHERE batch = batches.id);
ALTER TABLE batch_lines ADD COLUMN not_before BIGINT NOT NULL DEFAULT 0;

CREATE TABLE batch_owners (
    owner TEXT PRIMARY KEY,
    turn BIGINT NOT NULL DEFAULT 0,
    rest_until BIGINT NOT NULL DEFAULT 0
);
