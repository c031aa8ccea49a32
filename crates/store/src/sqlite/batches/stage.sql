INSERT INTO batches (id, owner, shape, endpoint, created_ms, expires_ms, cancelled_ms, total, meta, staged) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, 1)
