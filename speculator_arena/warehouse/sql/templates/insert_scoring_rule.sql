INSERT INTO scoring_rules VALUES (?, ?)
