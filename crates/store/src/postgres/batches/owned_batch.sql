SELECT id, owner, shape, endpoint, created_ms, expires_ms, cancelled_ms, total, meta FROM batches WHERE id = $1 AND owner = $2 AND NOT staged
