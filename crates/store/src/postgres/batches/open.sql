UPDATE batches SET staged = FALSE, total = $2 WHERE id = $1 AND staged
