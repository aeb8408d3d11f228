"""LowBArena's evaluation: a quantized checkpoint served beside BF16 of the same model, on the
same machine, with the same requests (../shared/spec/lowbarena-rules-protocol-28.txt).

What it shares with the speculator arena's runner is the machinery, not the steps: the engines'
starts and stops with their unprivileged user, reaper, health wait and device-idle wait
(runners/engines.py), the streamed client (stream.py), the host-contention sampler
(contention.py) and the status rows (status.py, queued.py). Its steps are its own: the timed
workloads (workload_pass.py), the engine's memory (memory_samples.py), the accuracy items
(accuracy.py), the KL probe (kl_probe.py); run.py orders them, the checkpoints' headers read
first, before any engine code runs.
"""
