DELETE FROM batch_lines WHERE batch = ?1
