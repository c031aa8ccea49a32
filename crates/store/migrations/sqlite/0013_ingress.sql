-- The caller's protocol and whether it asked for a stream, for the
-- request log.
ALTER TABLE ledger ADD COLUMN ingress TEXT;
ALTER TABLE ledger ADD COLUMN stream INTEGER NOT NULL DEFAULT 0;
