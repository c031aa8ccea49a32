SELECT COALESCE(SUM(bytes), 0) FROM batches WHERE owner = ?1
