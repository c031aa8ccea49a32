-- How many refusals at the door a row stands for: 1 for a refusal's own
-- row, more for the row that counts a minute's refusals past the request
-- log's limit (all alike), 0 for any other row. Spend counts refusals from
-- it, so they are counted exactly however many rows were written.
ALTER TABLE ledger ADD COLUMN refused INTEGER NOT NULL DEFAULT 0;
UPDATE ledger SET refused = 1 WHERE operation = 'refused';
