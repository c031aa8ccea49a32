-- The end user a request was made for (the caller's own field or the
-- operator's header), so spend can be grouped and budgeted per end user.
-- No index of its own: every row would pay for it, and what reads it reads
-- a time range (ledger_at) or a key's rows (ledger_key_at) anyway.
ALTER TABLE ledger ADD COLUMN end_user TEXT;
