"""Engine directories around the stdlib SSE stand-in (sse_engine.py), shared by the runner's
fixtures and the pool fixtures' test-split evaluation.

The server runs under the venv's interpreter (scripts/setup.sh builds the venv on the system
Python when it runs as root, so the engine's user can run it, as it runs the development engine):
it reads the target's tokenizer with `tokenizers` to answer prompt_logprobs at the arena's token
positions. The system Python has no `tokenizers`, and a stand-in started with it answers no
fidelity probe.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ENGINE_PYTHON = sys.executable


def make_engine(root: Path, name: str, mode: str = "normal", extra_env: dict | None = None) -> Path:
    """An engine directory: launch.sh runs sse_engine.py (copied in) with ENGINE_MODE set."""
    d = root / name
    d.mkdir(parents=True)
    shutil.copy(HERE / "sse_engine.py", d / "sse_engine.py")
    exports = "".join(f"export {k}='{v}'\n" for k, v in (extra_env or {}).items())
    (d / "launch.sh").write_text(
        "#!/bin/bash\nset -e\n"
        f"export ENGINE_MODE='{mode}'\n{exports}"
        'cd "$(dirname "$0")"\n'
        f"exec {ENGINE_PYTHON} sse_engine.py\n"
    )
    return d
