UPDATE batch_lines SET state = ?1, done_ms = ?2 WHERE (state = 0 OR (state = 1 AND lease_until < ?2))
AND batch IN (SELECT id FROM batches WHERE expires_ms <= ?2 AND cancelled_ms IS NULL AND staged = 0)
