INSERT INTO switchyard_schema (version) VALUES ($1)
