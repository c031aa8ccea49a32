SELECT record FROM groups ORDER BY name
