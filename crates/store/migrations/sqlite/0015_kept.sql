-- What the gateway keeps for its callers: uploaded files and stored
-- responses (owned by the key that made them), and batch jobs whose lines
-- are a queue (claimed under a lease, finished once).
CREATE TABLE kept_objects (
    kind TEXT NOT NULL,
    owner TEXT NOT NULL,
    id TEXT NOT NULL,
    created_ms INTEGER NOT NULL,
    expires_ms INTEGER,
    meta TEXT NOT NULL,
    body BLOB NOT NULL,
    PRIMARY KEY (kind, owner, id)
);
CREATE INDEX kept_objects_listed ON kept_objects (kind, owner, created_ms);
CREATE INDEX kept_objects_expiry ON kept_objects (expires_ms) WHERE expires_ms IS NOT NULL;

CREATE TABLE batches (
    id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    shape TEXT NOT NULL,
    endpoint TEXT NOT NULL,
    created_ms INTEGER NOT NULL,
    expires_ms INTEGER NOT NULL,
    cancelled_ms INTEGER,
    total INTEGER NOT NULL,
    meta TEXT NOT NULL
);
CREATE INDEX batches_owner ON batches (owner, created_ms);

CREATE TABLE batch_lines (
    batch TEXT NOT NULL,
    idx INTEGER NOT NULL,
    custom_id TEXT NOT NULL,
    body BLOB NOT NULL,
    state INTEGER NOT NULL DEFAULT 0,
    worker TEXT,
    attempt INTEGER NOT NULL DEFAULT 0,
    lease_until INTEGER NOT NULL DEFAULT 0,
    status INTEGER NOT NULL DEFAULT 0,
    result BLOB,
    done_ms INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (batch, idx)
);
CREATE INDEX batch_lines_open ON batch_lines (state, lease_until) WHERE state < 2;

-- A ledger row is stored once by its entry: a batch line run again after
-- a crash is billed at most once (its entry is drawn from the line).
CREATE UNIQUE INDEX ledger_entry_once ON ledger (entry) WHERE entry <> 0;
