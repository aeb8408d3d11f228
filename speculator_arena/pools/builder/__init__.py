"""Building a task's pools, one module per step (the Dagster assets in
speculator_arena.assets.pools call them; tests/pools/build_all.py runs them in order without Dagster):

- `folders`: the build's own folder, begun as a copy of the served pool and switched to at the
  end with one rename of a link (a build that fails leaves the previous pool served);
- `context`: `BuildContext`, what every step needs (protocol, sources, tokenizer, settings);
- `inputs`: step 1, the sources manifest; step 2, the structure fitted from the traces;
- `candidates`: step 3, the public/hidden split of the sources and each split's order;
- `sessions`, `fidelity`, `splits`, `warmup`: step 4, the timed sessions, fidelity texts and
  manifest of each split, then its warm-up sessions;
- `probes`: step 5, the greedy probe prompts;
- `structure`, `diversity`, `tokens`: the structure fitted from the traces, the prompt-diversity
  selection and token counting the steps share.

The sources are read through `pools.ingest`; the served pool is read through `pools.api`.

Every file is written atomically (temp file, then rename); the hidden pool lives under a
`hidden/` folder readable by its owner only (pools/layout.py), and nothing from it is returned
in a manifest except counts and digests.
"""
