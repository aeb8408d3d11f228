"""ENOSPC injected at the OS boundary, for test_disk_full.py where no small filesystem can be
mounted (no tmpfs without root): put this folder on PYTHONPATH and name a trigger file in
ARENA_TEST_ENOSPC_TRIGGER; while the file exists, every `os.replace` (the last step of the arena's
atomic write, atomic.py, which every stored thing goes through) fails as a full disk does."""

import errno
import os

_TRIGGER = os.environ.get("ARENA_TEST_ENOSPC_TRIGGER")

if _TRIGGER:
    _replace = os.replace

    def _full_replace(src, dst, *args, **kwargs):
        if os.path.exists(_TRIGGER):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return _replace(src, dst, *args, **kwargs)

    os.replace = _full_replace
