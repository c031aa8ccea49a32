UPDATE batch_lines SET state = 0, worker = NULL, lease_until = 0, not_before = ?5
WHERE batch = ?1 AND idx = ?2 AND state = 1 AND worker = ?3 AND attempt = ?4
