INSERT INTO config_versions (version, at_ms, author, message, text) VALUES (?1, ?2, ?3, ?4, ?5)
