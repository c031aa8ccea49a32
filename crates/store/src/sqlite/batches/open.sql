UPDATE batches SET staged = 0, total = ?2 WHERE id = ?1 AND staged = 1
