SELECT state, COUNT(*), MAX(done_ms) FROM batch_lines WHERE batch = ?1 GROUP BY state
