SELECT id, owner, shape, endpoint, created_ms, expires_ms, cancelled_ms, total, meta FROM batches WHERE owner = $1 AND NOT staged
ORDER BY created_ms DESC, id DESC LIMIT $2
