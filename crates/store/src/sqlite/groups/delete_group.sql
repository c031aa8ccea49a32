DELETE FROM groups WHERE name = ?1
