DELETE FROM kept_chunks WHERE kind = $1 AND owner = $2 AND id = $3
