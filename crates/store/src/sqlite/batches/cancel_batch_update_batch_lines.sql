UPDATE batch_lines SET state = ?2, done_ms = ?3 WHERE batch = ?1 AND state = ?4
