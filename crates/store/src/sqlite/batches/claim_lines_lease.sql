UPDATE batch_lines SET state = 1, worker = ?3, attempt = ?4, lease_until = ?5
WHERE batch = ?1 AND idx = ?2
