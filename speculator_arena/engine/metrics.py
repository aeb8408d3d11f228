"""`/metrics` in Prometheus text with the pinned vLLM's metric names.

The arena reads `vllm:spec_decode_*` around every pass (protocol section 3) and shows the
acceptance it implies; using vLLM's names means the same reader works for every engine.
A private registry keeps two engines in one process (tests) from sharing counters.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, disable_created_metrics, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST


class EngineMetrics:
    content_type = CONTENT_TYPE_LATEST

    def __init__(self, model_name: str, num_spec_tokens: int, inflate: float = 1.0):
        disable_created_metrics()  # vLLM's text has no *_created samples; this process serves one engine
        self.registry = CollectorRegistry()
        self.inflate = inflate  # the `inflate_counters` attack reports more accepted tokens than were
        labels = ["model_name", "engine"]
        self._lv = {"model_name": model_name, "engine": "0"}
        r = self.registry
        self.drafts = Counter("vllm:spec_decode_num_drafts", "Number of spec decoding drafts.", labels, registry=r)
        self.draft_tokens = Counter("vllm:spec_decode_num_draft_tokens", "Number of draft tokens.", labels, registry=r)
        self.accepted = Counter(
            "vllm:spec_decode_num_accepted_tokens", "Number of accepted tokens.", labels, registry=r
        )
        self.accepted_pos = Counter(
            "vllm:spec_decode_num_accepted_tokens_per_pos",
            "Accepted tokens per draft position.",
            labels + ["position"],
            registry=r,
        )
        self.prompt_tokens = Counter("vllm:prompt_tokens", "Number of prefill tokens processed.", labels, registry=r)
        self.generation_tokens = Counter(
            "vllm:generation_tokens", "Number of generation tokens processed.", labels, registry=r
        )
        self.cache_queries = Counter(
            "vllm:prefix_cache_queries", "Prefix cache queries, in tokens.", labels, registry=r
        )
        self.cache_hits = Counter("vllm:prefix_cache_hits", "Prefix cache hits, in tokens.", labels, registry=r)
        self.requests_ok = Counter(
            "vllm:request_success", "Finished requests.", labels + ["finished_reason"], registry=r
        )
        self.running = Gauge("vllm:num_requests_running", "Requests being decoded.", labels, registry=r)
        self.waiting = Gauge("vllm:num_requests_waiting", "Requests waiting for a lane.", labels, registry=r)
        self.cache_usage = Gauge(
            "vllm:kv_cache_usage_perc", "Share of the prefix cache budget in use.", labels, registry=r
        )
        for pos in range(num_spec_tokens):
            self.accepted_pos.labels(**self._lv, position=str(pos))
        for c in (
            self.drafts,
            self.draft_tokens,
            self.accepted,
            self.prompt_tokens,
            self.generation_tokens,
            self.cache_queries,
            self.cache_hits,
            self.running,
            self.waiting,
            self.cache_usage,
        ):
            c.labels(**self._lv)

    def spec_round(self, drafted: int, accepted: int) -> None:
        self.drafts.labels(**self._lv).inc()
        self.draft_tokens.labels(**self._lv).inc(drafted)
        self.accepted.labels(**self._lv).inc(accepted * self.inflate)
        for pos in range(accepted):
            self.accepted_pos.labels(**self._lv, position=str(pos)).inc(self.inflate)

    def request_done(self, prompt: int, cached: int, generated: int, reason: str) -> None:
        self.prompt_tokens.labels(**self._lv).inc(prompt)
        self.generation_tokens.labels(**self._lv).inc(generated)
        self.cache_queries.labels(**self._lv).inc(prompt)
        self.cache_hits.labels(**self._lv).inc(cached)
        self.requests_ok.labels(**self._lv, finished_reason=reason).inc()

    def lanes(self, running: int, waiting: int, cache_share: float) -> None:
        self.running.labels(**self._lv).set(running)
        self.waiting.labels(**self._lv).set(waiting)
        self.cache_usage.labels(**self._lv).set(cache_share)

    def render(self) -> bytes:
        return generate_latest(self.registry)
