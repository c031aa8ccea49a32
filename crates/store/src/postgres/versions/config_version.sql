SELECT version, at_ms, author, message, text FROM config_versions WHERE version = $1
