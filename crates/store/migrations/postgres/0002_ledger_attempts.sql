-- Every upstream attempt of a request that tried more than one lane, as
-- JSON (NULL for the usual single attempt).
ALTER TABLE ledger ADD COLUMN attempts TEXT;
