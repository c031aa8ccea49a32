DELETE FROM kept_objects WHERE user_tag = ?1
