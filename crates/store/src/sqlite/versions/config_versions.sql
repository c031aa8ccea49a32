SELECT version, at_ms, author, message, text FROM config_versions
WHERE (?1 IS NULL OR version < ?1) ORDER BY version DESC LIMIT ?2
