SELECT COALESCE(max(version), 0) FROM config_versions
