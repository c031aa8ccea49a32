SELECT entry, at_ms, request_id, key_id, grp, user_tag, retention, sealed FROM kept_content WHERE entry = ?1
