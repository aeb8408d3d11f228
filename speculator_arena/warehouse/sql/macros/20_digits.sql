-- A text of one to three decimal digits as an integer (0 to 999); NULL for any other text.
CREATE OR REPLACE MACRO arena_digits(s) AS CASE WHEN regexp_full_match(s, '[0-9]{1,3}') THEN CAST(s AS BIGINT) END
