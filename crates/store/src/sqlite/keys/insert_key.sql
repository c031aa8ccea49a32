INSERT INTO keys (id, hash, aws_access_key_id, record) VALUES (?1, ?2, ?3, ?4)
