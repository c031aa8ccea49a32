-- The audit log's retention purges by time.
CREATE INDEX IF NOT EXISTS audit_at ON audit (at_ms);
