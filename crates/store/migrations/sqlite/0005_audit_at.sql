-- The audit log's retention purges by time.
CREATE INDEX audit_at ON audit (at_ms);
