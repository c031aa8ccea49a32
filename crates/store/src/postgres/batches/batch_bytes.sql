SELECT COALESCE(SUM(bytes), 0)::BIGINT FROM batches WHERE owner = $1
