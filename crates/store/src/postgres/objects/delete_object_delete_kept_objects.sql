DELETE FROM kept_objects WHERE kind = $1 AND owner = $2 AND id = $3
