-- The end user a request was made for (the caller's own field or the
-- operator's header), so spend can be grouped and budgeted per end user.
ALTER TABLE ledger ADD COLUMN end_user TEXT;
CREATE INDEX ledger_end_user ON ledger (end_user, at_ms) WHERE end_user IS NOT NULL;
