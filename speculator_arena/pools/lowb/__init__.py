"""LowBArena's item pools: accuracy items (HumanEval, RULER, operator-declared benchmarks) split
public/hidden with the pool key as the session pools are, the KL probe prompts and the workload
prompts' material. Built by `build.build_items`, read through `api` only."""
