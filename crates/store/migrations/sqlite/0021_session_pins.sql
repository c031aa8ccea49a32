-- Session and prompt-prefix pins of a single node, kept across restarts
-- (a fleet shares them through Redis instead): which lane of a pool a
-- session last used, until when, and how many times its lane changed.
CREATE TABLE session_pins (
    pool TEXT NOT NULL,
    session TEXT NOT NULL,
    lane TEXT NOT NULL,
    expires_ms INTEGER NOT NULL,
    switches INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (pool, session)
);
CREATE INDEX session_pins_expiry ON session_pins (expires_ms);
