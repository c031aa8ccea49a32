DELETE FROM batches WHERE staged AND created_ms <= $1
