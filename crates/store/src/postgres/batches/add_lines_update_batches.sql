UPDATE batches SET bytes = bytes + $2 WHERE id = $1 AND staged
