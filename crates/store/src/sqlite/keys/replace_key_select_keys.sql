SELECT record FROM keys WHERE id = ?1
