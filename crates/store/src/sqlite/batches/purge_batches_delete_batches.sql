DELETE FROM batches WHERE staged = 1 AND created_ms <= ?1
