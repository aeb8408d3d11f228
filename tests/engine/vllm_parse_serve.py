"""Parse `vllm serve` command lines with the installed vLLM's own parser (run by the vLLM venv).

Reads {label: argv} as JSON on stdin (each argv starting with `serve`) and prints {label: error
or null}. The parser is built as `vllm` (vllm/entrypoints/cli/main.py) builds it, with the serve
subcommand's `validate` after parsing; an unknown flag or a bad value is vLLM's own error text.
Nothing is served and no model is read.
"""

import contextlib
import io
import json
import sys

from vllm.entrypoints.cli.serve import ServeSubcommand
from vllm.utils.argparse_utils import FlexibleArgumentParser


def main() -> None:
    argvs = json.load(sys.stdin)
    parser = FlexibleArgumentParser(description="vLLM CLI")
    subparsers = parser.add_subparsers(required=False, dest="subparser")
    serve = ServeSubcommand()
    serve.subparser_init(subparsers)
    out = {}
    for label, argv in argvs.items():
        err = io.StringIO()
        try:
            with contextlib.redirect_stderr(err):
                args = parser.parse_args(argv)
            serve.validate(args)
            out[label] = None
        except SystemExit:
            out[label] = err.getvalue().strip()[-1000:] or "the parser exited"
        except Exception as exc:  # validate's refusals
            out[label] = f"{type(exc).__name__}: {exc}"
    print(json.dumps(out))


if __name__ == "__main__":
    main()
