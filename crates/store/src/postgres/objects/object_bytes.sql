SELECT COALESCE(SUM(size), 0)::BIGINT FROM kept_objects
WHERE owner = $1 AND (expires_ms IS NULL OR expires_ms > $2)
