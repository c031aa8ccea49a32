DELETE FROM kept_content WHERE user_tag = ?1
