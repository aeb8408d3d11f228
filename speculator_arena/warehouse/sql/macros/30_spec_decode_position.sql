-- The draft position of a per-position sample: its labels' `position` as an integer from 0 to
-- 999; NULL when the labels (which the engine writes) are not a JSON object or their position is
-- not such an integer. Invalid JSON never reaches a JSON function (they raise on it).
CREATE OR REPLACE MACRO spec_decode_position(labels) AS arena_digits(json_extract_string(
    CASE WHEN json_type(CASE WHEN json_valid(labels) THEN labels END) = 'OBJECT' THEN labels END, '$.position'
))
