-- What else a request's row records, as JSON (NULL when nothing): a
-- response-cache hit and what it saved, and the guardrail decisions made
-- (policy, rule, action, direction; never the text).
ALTER TABLE ledger ADD COLUMN notes TEXT;
