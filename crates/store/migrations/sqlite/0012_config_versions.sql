-- The config as versioned documents: each version's text as written, who
-- made it, when and why.
CREATE TABLE config_versions (
    version INTEGER PRIMARY KEY,
    at_ms INTEGER NOT NULL,
    author TEXT NOT NULL,
    message TEXT NOT NULL,
    text TEXT NOT NULL
);
