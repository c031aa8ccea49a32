DELETE FROM batches WHERE id = ?1 AND owner = ?2 AND staged = 0
