SELECT record FROM keys WHERE id > $1 ORDER BY id LIMIT $2
