INSERT INTO batch_lines (batch, idx, custom_id, body) VALUES (?1, ?2, ?3, ?4)
