-- What the gateway keeps for its callers: uploaded files and stored
-- responses (owned by the key that made them), and batch jobs whose lines
-- are a queue every instance drains (claimed FOR UPDATE SKIP LOCKED under
-- a lease, finished once). The ledger's entry is already unique.
CREATE TABLE kept_objects (
    kind TEXT NOT NULL,
    owner TEXT NOT NULL,
    id TEXT NOT NULL,
    created_ms BIGINT NOT NULL,
    expires_ms BIGINT,
    meta TEXT NOT NULL,
    body BYTEA NOT NULL,
    PRIMARY KEY (kind, owner, id)
);
CREATE INDEX kept_objects_listed ON kept_objects (kind, owner, created_ms);
CREATE INDEX kept_objects_expiry ON kept_objects (expires_ms) WHERE expires_ms IS NOT NULL;

CREATE TABLE batches (
    id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    shape TEXT NOT NULL,
    endpoint TEXT NOT NULL,
    created_ms BIGINT NOT NULL,
    expires_ms BIGINT NOT NULL,
    cancelled_ms BIGINT,
    total INTEGER NOT NULL,
    meta TEXT NOT NULL
);
CREATE INDEX batches_owner ON batches (owner, created_ms);

CREATE TABLE batch_lines (
    batch TEXT NOT NULL REFERENCES batches (id) ON DELETE CASCADE,
    idx INTEGER NOT NULL,
    custom_id TEXT NOT NULL,
    body BYTEA NOT NULL,
    state SMALLINT NOT NULL DEFAULT 0,
    worker TEXT,
    attempt INTEGER NOT NULL DEFAULT 0,
    lease_until BIGINT NOT NULL DEFAULT 0,
    status INTEGER NOT NULL DEFAULT 0,
    result BYTEA,
    done_ms BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (batch, idx)
);
CREATE INDEX batch_lines_open ON batch_lines (state, lease_until) WHERE state < 2;
