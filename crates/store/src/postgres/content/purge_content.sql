DELETE FROM kept_content WHERE at_ms < $1
