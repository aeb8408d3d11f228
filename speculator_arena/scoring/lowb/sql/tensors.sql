-- Both engines' checkpoint tensors (the stock engine's are the BF16 target's), for the contract.
SELECT evaluation_id, engine, tensor, dtype, shape, bytes
FROM raw_lowb_tensors
ORDER BY evaluation_id, engine, tensor
