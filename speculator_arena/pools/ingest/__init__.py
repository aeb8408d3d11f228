"""Reading the pools' sources (issue 34: ingest apart from the build and the served pool): the
declared conversation sets (`source_sets/`, YAML), the readers of every format they come in
(`readers`, `conversations`, `trace_readers`, `app_readers`), the containers and compression they
are stored in, and the errors a broken file gets (`source_errors`). Nothing here builds or serves
a pool: `pools.builder` reads through these modules, and `tests/test_layers.py` checks that they
import nothing of it."""
