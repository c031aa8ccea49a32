-- Request and reply text a group's retention keeps, sealed by the gateway
-- (the store never sees it in the clear); found by ledger entry, erased by
-- the end user's keyed tag, purged by age.
CREATE TABLE kept_content (
    entry BIGINT PRIMARY KEY,
    at_ms BIGINT NOT NULL,
    request_id TEXT NOT NULL,
    key_id TEXT,
    grp TEXT,
    user_tag TEXT,
    retention TEXT NOT NULL,
    sealed BYTEA NOT NULL
);
CREATE INDEX kept_content_at ON kept_content (at_ms);
CREATE INDEX kept_content_user ON kept_content (user_tag);
