SELECT COALESCE(max(version), 0)::BIGINT FROM config_versions
