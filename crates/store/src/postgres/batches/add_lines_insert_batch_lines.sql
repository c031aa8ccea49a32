INSERT INTO batch_lines (batch, idx, custom_id, body)
SELECT $1, * FROM UNNEST($2::INTEGER[], $3::TEXT[], $4::BYTEA[])
