"""The unprivileged system users the arena runs untrusted work as: `arena-engine` (an engine,
runners/lifecycle.py) and `arena-intake` (a submission's extraction and fetches,
frontdoor/sandbox.py). Created on first use, when the arena runs as root."""

from __future__ import annotations

import pwd
import subprocess


def system_user(name: str) -> pwd.struct_passwd:
    """A system user without home or shell (created with useradd when missing; root only)."""
    try:
        return pwd.getpwnam(name)
    except KeyError:
        pass
    r = subprocess.run(
        ["useradd", "--system", "--no-create-home", "--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin", name],
        capture_output=True,
        text=True,
    )
    if r.returncode not in (0, 9):  # 9: exists (a concurrent process made it)
        raise RuntimeError(f"useradd {name} failed: {r.stderr.strip()}")
    return pwd.getpwnam(name)
