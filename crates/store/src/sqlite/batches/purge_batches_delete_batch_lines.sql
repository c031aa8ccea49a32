DELETE FROM batch_lines WHERE batch IN (SELECT id FROM batches WHERE staged = 1 AND created_ms <= ?1)
