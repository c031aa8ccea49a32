-- The config as versioned documents: each version's text as written, who
-- made it, when and why. A new version is announced to every instance.
CREATE TABLE config_versions (
    version BIGINT PRIMARY KEY,
    at_ms BIGINT NOT NULL,
    author TEXT NOT NULL,
    message TEXT NOT NULL,
    text TEXT NOT NULL
);
