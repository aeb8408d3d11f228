"""The development engine: a real small model served under the engine contract (protocol section 3).

`python3 -m speculator_arena.engine.serve` reads the section 3 variables plus the engine
directory's own `DEV_ENGINE_*` variables and serves an OpenAI-compatible API on 127.0.0.1.
It depends only on torch, transformers, safetensors, numpy, prometheus_client and the standard
library, so it runs in a bare GPU image. Nothing here imports the rest of the platform.
"""
