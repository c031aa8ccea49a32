DELETE FROM batches WHERE id = $1 AND owner = $2 AND NOT staged
