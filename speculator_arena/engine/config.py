"""The engine's configuration, read once from the environment.

Section 3 of the protocol fixes what the arena passes (TARGET, SPECULATOR, TOKENIZER, PORT,
SERVED_NAME, MAX_MODEL_LEN, MAX_NUM_SEQS, GPU_MEMORY_UTILIZATION, PREFIX_CACHING); the engine
directory's launch.sh adds the development engine's own `DEV_ENGINE_*` choices (speculation and,
for the gate tests, one attack). Reading them in one place keeps the server free of os.environ.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from speculator_arena.errors import ArenaError

SPEC_MODES = ("none", "ngram", "selfdraft", "suffix")
# vLLM's names (SpeculativeConfig.rejection_sample_method): "standard" verifies every draft against
# the target; "synthetic" accepts drafts with a set probability, unverified (lossy: sampling.py).
REJECTION_METHODS = ("standard", "synthetic")
ATTACKS = (
    "none",
    "loose_accept",
    "force_greedy",
    "other_sampling",
    "quantized",
    "cut_half",
    "inflate_counters",
    "hog_memory",
    "empty_probe_replies",
    "garbage_logprob_ids",
    "skip_probe_items",
    # LowBArena's planted engines (engines/attacks/lowb-*): each breaks one engine rule or gate.
    "lowb_no_prompt_logprobs",  # refuses prompt_logprobs (the KL probe) with an HTTP error
    "lowb_queue",  # one request at a time whatever MAX_NUM_SEQS says, the rest queued
    "lowb_short",  # every answer stopped at half its max_tokens, ignore_eos ignored
    "lowb_long",  # never stops at EOS: every answer runs to max_tokens
)


class ConfigError(ValueError, ArenaError):
    """A missing or malformed variable; the engine refuses to start with one clear line."""


def _int(env, name, default=None):
    raw = env.get(name)
    if raw in (None, ""):
        if default is None:
            raise ConfigError(f"{name} is required (protocol section 3)")
        return default
    try:
        return int(raw)
    except ValueError:
        raise ConfigError(f"{name} must be an integer, got {raw!r}") from None


def _float(env, name, default):
    raw = env.get(name)
    if raw in (None, ""):
        return default
    try:
        return float(raw)
    except ValueError:
        raise ConfigError(f"{name} must be a number, got {raw!r}") from None


@dataclass(frozen=True)
class EngineConfig:
    target: str
    tokenizer: str
    speculator: str
    port: int
    served_name: str
    max_model_len: int
    max_num_seqs: int
    gpu_memory_utilization: float
    prefix_caching: bool
    spec: str = "none"
    spec_k: int = 4
    draft_layers: int = 24
    draft_greedy: bool = False  # self-draft proposes its argmax (a point-mass q) instead of sampling q
    ngram_max: int = 4
    ngram_min: int = 2
    suffix_max_match: int = 64  # suffix decoding: longest suffix matched (suffix_drafter.py)
    suffix_min_prob: float = 0.1  # stop drafting when the running product of shares falls below
    suffix_alpha: float = 1.0  # draft at most alpha * match length tokens (and at most spec_k)
    attack: str = "none"
    loose_threshold: float = 0.3
    skip_every: int = 11  # skip_probe_items: refuse every Nth prompt_logprobs request
    rejection_sample_method: str = "standard"
    synthetic_acceptance_rate: float | None = None  # per draft, with "synthetic" only
    cache_tokens: int | None = None  # None: derived (see prefix_cache.budget_tokens)
    device: str = "auto"
    dtype: str = "auto"
    threads: int | None = None
    prefill_chunk: int = 512
    # a fixed sleep before every decoding step (0: none): an honestly slower engine, lossless, for
    # tests that need a real evaluation scoring below another's interval (engines/attacks/dev-slow-ngram)
    step_sleep_ms: float = 0.0
    extra: dict = field(default_factory=dict)

    @property
    def synthetic_rate(self) -> float | None:
        """The probability a draft is accepted unverified, or None when drafts are verified."""
        return self.synthetic_acceptance_rate if self.rejection_sample_method == "synthetic" else None

    @classmethod
    def from_env(cls, env=None) -> EngineConfig:
        env = dict(os.environ if env is None else env)
        target = env.get("TARGET") or env.get("ARTIFACT")
        if not target:
            raise ConfigError("TARGET (or ARTIFACT) is required: the sealed target checkpoint directory")
        if not os.path.isdir(target):
            raise ConfigError(f"TARGET {target!r} is not a directory")
        spec = env.get("DEV_ENGINE_SPEC", "none") or "none"
        if spec not in SPEC_MODES:
            raise ConfigError(f"DEV_ENGINE_SPEC must be one of {SPEC_MODES}, got {spec!r}")
        attack = env.get("DEV_ENGINE_ATTACK", "none") or "none"
        if attack not in ATTACKS:
            raise ConfigError(f"DEV_ENGINE_ATTACK must be one of {ATTACKS}, got {attack!r}")
        method = env.get("DEV_ENGINE_REJECTION_SAMPLE_METHOD", "standard") or "standard"
        if method not in REJECTION_METHODS:
            raise ConfigError(f"DEV_ENGINE_REJECTION_SAMPLE_METHOD must be one of {REJECTION_METHODS}, got {method!r}")
        rate = _float(env, "DEV_ENGINE_SYNTHETIC_ACCEPTANCE_RATE", None)
        if (method == "synthetic") != (rate is not None):
            raise ConfigError(
                "DEV_ENGINE_SYNTHETIC_ACCEPTANCE_RATE is required with DEV_ENGINE_REJECTION_SAMPLE_METHOD=synthetic "
                "and allowed only with it"
            )
        if rate is not None and not 0.0 <= rate <= 1.0:
            raise ConfigError(f"DEV_ENGINE_SYNTHETIC_ACCEPTANCE_RATE must be in [0, 1], got {rate}")
        cfg = cls(
            target=target,
            tokenizer=env.get("TOKENIZER") or target,
            speculator=env.get("SPECULATOR", ""),
            port=_int(env, "PORT"),
            served_name=env.get("SERVED_NAME") or "target",
            max_model_len=_int(env, "MAX_MODEL_LEN"),
            max_num_seqs=_int(env, "MAX_NUM_SEQS", 1),
            gpu_memory_utilization=_float(env, "GPU_MEMORY_UTILIZATION", 0.9),
            prefix_caching=env.get("PREFIX_CACHING", "1") not in ("0", "false", "False", ""),
            spec=spec,
            spec_k=_int(env, "DEV_ENGINE_SPEC_K", 4),
            draft_layers=_int(env, "DEV_ENGINE_DRAFT_LAYERS", 24),
            draft_greedy=env.get("DEV_ENGINE_DRAFT_GREEDY", "0") in ("1", "true", "True"),
            ngram_max=_int(env, "DEV_ENGINE_NGRAM_MAX", 4),
            ngram_min=_int(env, "DEV_ENGINE_NGRAM_MIN", 2),
            suffix_max_match=_int(env, "DEV_ENGINE_SUFFIX_MAX_MATCH", 64),
            suffix_min_prob=_float(env, "DEV_ENGINE_SUFFIX_MIN_PROB", 0.1),
            suffix_alpha=_float(env, "DEV_ENGINE_SUFFIX_ALPHA", 1.0),
            attack=attack,
            loose_threshold=_float(env, "DEV_ENGINE_LOOSE_THRESHOLD", 0.3),
            skip_every=_int(env, "DEV_ENGINE_SKIP_EVERY", 11),
            rejection_sample_method=method,
            synthetic_acceptance_rate=rate,
            cache_tokens=_int(env, "DEV_ENGINE_CACHE_TOKENS", 0) or None,
            device=env.get("DEV_ENGINE_DEVICE", "auto") or "auto",
            dtype=env.get("DEV_ENGINE_DTYPE", "auto") or "auto",
            threads=_int(env, "DEV_ENGINE_THREADS", 0) or None,
            prefill_chunk=_int(env, "DEV_ENGINE_PREFILL_CHUNK", 512),
            step_sleep_ms=_float(env, "DEV_ENGINE_STEP_SLEEP_MS", 0.0),
        )
        if cfg.skip_every < 1:
            raise ConfigError("DEV_ENGINE_SKIP_EVERY must be at least 1")
        if cfg.spec_k < 1:
            raise ConfigError("DEV_ENGINE_SPEC_K must be at least 1")
        if cfg.suffix_max_match < 1:
            raise ConfigError("DEV_ENGINE_SUFFIX_MAX_MATCH must be at least 1")
        if not 0.0 <= cfg.suffix_min_prob <= 1.0:
            raise ConfigError(f"DEV_ENGINE_SUFFIX_MIN_PROB must be in [0, 1], got {cfg.suffix_min_prob}")
        if not cfg.suffix_alpha > 0.0:
            raise ConfigError(f"DEV_ENGINE_SUFFIX_ALPHA must be positive, got {cfg.suffix_alpha}")
        if not 0.0 <= cfg.step_sleep_ms <= 10_000.0:
            raise ConfigError(f"DEV_ENGINE_STEP_SLEEP_MS must be in [0, 10000], got {cfg.step_sleep_ms}")
        if cfg.max_num_seqs < 1 or cfg.max_model_len < 2:
            raise ConfigError("MAX_NUM_SEQS must be >= 1 and MAX_MODEL_LEN >= 2")
        return cfg
