-- POST /register's counts: accounts it made in all, and those of one client since a time.
SELECT (SELECT count(*) FROM registrations) AS total,
       (SELECT count(*) FROM registrations WHERE client = :client AND created_at > :since) AS recent
