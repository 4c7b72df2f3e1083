"""Command line: ``ortdist build|plan|analyze|smoke|inspect|report|bench|...`` (``ortdist -h`` lists all).

parser.py declares the commands, commands.py runs them over the library; here: exit codes.
"""

from __future__ import annotations

import sys

from .. import children, diskspace
from ..errors import OrtdistError
from ..log import NORMAL, QUIET, VERBOSE, log
from .commands import SCHEMA_PATH
from .parser import parser

__all__ = ["SCHEMA_PATH", "main", "parser"]


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    log.configure(verbosity=VERBOSE if args.verbose else QUIET if args.quiet else NORMAL)
    try:
        with children.signals_handled():  # SIGTERM/SIGHUP unwind (and clean up) like Ctrl-C
            code: int = args.func(args)
        return code
    except OrtdistError as exc:
        log.error(str(exc))
        return exc.exit_code
    except OSError as exc:  # a backstop: the specific errors are raised where files are read
        if exc.errno in diskspace.FULL:
            full = diskspace.full_disk(exc.filename, args.command)
            log.error(str(full))
            return full.exit_code
        log.error(
            f"ortdist {args.command}: {exc.filename or 'a file'}: {exc.strerror or exc}\n"
            "  how to fix: check that the path exists and that you may read (and write) it"
        )
        return 1
    except UnicodeDecodeError as exc:
        log.error(f"ortdist {args.command}: a file is not UTF-8 text: {exc}")
        return 1
    except KeyboardInterrupt as exc:  # children.Terminated too: the child groups are gone by now
        log.error(f"interrupted ({children.signal_name(exc)}); rerun the same command to resume")
        return children.exit_code(exc)


if __name__ == "__main__":
    sys.exit(main())
