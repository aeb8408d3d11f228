-- Per evaluation and domain: the paired drops' count, mean and sample standard deviation.
SELECT evaluation_id, domain, count(d) AS n, avg(d) AS drop, stddev_samp(d) AS sd
FROM item_pairs
WHERE d IS NOT NULL
GROUP BY ALL
ORDER BY ALL
