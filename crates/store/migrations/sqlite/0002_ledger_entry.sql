-- The gateway's id for each ledger row (kept for every store alike; SQLite
-- commits in-process, so a batch is never written twice there).
ALTER TABLE ledger ADD COLUMN entry INTEGER NOT NULL DEFAULT 0;
