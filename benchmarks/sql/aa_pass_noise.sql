-- Per matched request of every interleaved A/A evaluation (24 timed passes): the log of the
-- candidate's time over the stock's for the same session, turn, seed and reply length
-- (benchmarks/aa_pass_noise.py). {home}: the arena home.
with r as (
  select evaluation_id e, engine, workload, pass_index, session_id, turn, seed, output_tokens n,
         ended_at - sent_at dt
  from read_parquet('{home}/raw/requests/*/*.parquet', hive_partitioning = true)
  where done and output_tokens > 1
), interleaved as (
  select evaluation_id from read_parquet('{home}/raw/passes/*/*.parquet', hive_partitioning = true)
  group by 1 having count(*) >= 24
)
select a.e, a.workload, a.pass_index, ln(a.dt / b.dt) as lr
from r a join r b using (e, workload, pass_index, session_id, turn, seed, n)
where a.engine = 'candidate' and b.engine = 'stock' and a.e in (select evaluation_id from interleaved)
