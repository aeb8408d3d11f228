-- The pass sums of the evaluations read from the raw rows in this scoring (the warehouse's view
-- pass_request_sums over `staged_requests`, which holds only theirs), for the request store.
SELECT * FROM pass_request_sums
