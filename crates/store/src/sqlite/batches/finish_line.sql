UPDATE batch_lines SET state = ?5, status = ?6, result = ?7, done_ms = ?8
WHERE batch = ?1 AND idx = ?2 AND state = 1 AND worker = ?3 AND attempt = ?4
