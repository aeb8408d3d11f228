# The kubernetes backend's runner image: the protocol's pinned engine image (protocol v1
# engine_environment.image: vllm-openai 0.25.1, commit 7a33ba95f) plus the arena's runner.
# Build from the repository root:
#   docker build -f deploy/runner.Dockerfile -t speculator-arena-runner:vllm-openai-0.25.1 .
# (`speculator-arena-runner:vllm-openai-0.25.1` is the name the pods use unless ARENA_K8S_IMAGE
# says otherwise; push it where the cluster's nodes pull from.)
#
# Not built in this repository's CI: the development machine has no Docker engine.
ARG VLLM_IMAGE=vllm/vllm-openai:v0.25.1
FROM ${VLLM_IMAGE}

# The runner's own dependencies that the vLLM image lacks; torch, transformers and tokenizers are
# the image's (the pinned engine's), never replaced.
RUN python3 -m pip install --no-cache-dir \
        "pyarrow>=20" "pydantic>=2.7" "pyyaml>=6" "httpx>=0.27" "numpy>=2" "nvidia-ml-py>=12" \
        "prometheus-client>=0.20" "dagster-pipes==1.13.27"

# The repository as is: the runner resolves the reference engines (engines/...) against it.
COPY speculator_arena /opt/arena/speculator_arena
COPY engines /opt/arena/engines
COPY pyproject.toml README.md /opt/arena/
ENV PYTHONPATH=/opt/arena PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
WORKDIR /opt/arena
RUN python3 -c "import speculator_arena.backends.kubernetes.in_pod, speculator_arena.runners.harness, \
speculator_arena.backends.kubernetes.results, speculator_arena.backends.kubernetes.engine_sidecar, dagster_pipes" \
    && ln -sf "$(command -v python3)" /usr/local/bin/python

# The unprivileged user the pod's runner runs as (runAsUser/runAsGroup 1000,
# KubernetesSettings.runner_uid). The engine's container runs the same image under
# KubernetesSettings.engine_uid (1001), which needs no account: its HOME is set in the pod.
RUN useradd --uid 1000 --user-group --no-create-home --home-dir /arena/scratch arena
USER 1000:1000
ENTRYPOINT []
CMD ["python", "-m", "speculator_arena.backends.kubernetes.in_pod", "--help"]
