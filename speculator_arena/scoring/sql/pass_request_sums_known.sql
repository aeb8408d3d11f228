-- `pass_request_sums` on the scorer's connection: the rows of every evaluation scored, stored
-- and fresh (`request_sums`, registered by scoring/rows.py), which the view pass_requests reads.
CREATE OR REPLACE TEMP VIEW pass_request_sums AS
SELECT * FROM request_sums
