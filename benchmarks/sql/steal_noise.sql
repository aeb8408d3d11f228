-- Per timed pass and engine of every A/A evaluation whose id matches {pattern}: its time (the
-- workload's kind: request time on solo, busy window on team and busy) and the steal of its
-- contention intervals per second of them (benchmarks/steal_noise.py). Read through the
-- analysts' views of the home's arena.duckdb.
with steal as (
  select evaluation_id, pass_id, engine, sum(steal_seconds) / sum(ended_at - started_at) as f
  from raw_contention where error is null group by all
)
select p.evaluation_id, p.workload, p.pass_index, p.engine,
       case when p.workload = 'solo' then p.request_seconds else p.busy_seconds end as seconds, s.f
from pass_speeds p join steal s using (evaluation_id, pass_id, engine)
where p.evaluation_id like '{pattern}'
order by all
