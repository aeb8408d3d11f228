"""The pool tests' shared builds live in tests/pool_fixtures.py (the board's hidden-text test
uses the same test-split evaluation)."""

from pool_fixtures import KEY  # noqa: F401
