UPDATE keys SET hash = ?2, aws_access_key_id = ?3, record = ?4 WHERE id = ?1
