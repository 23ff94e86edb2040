"""`python -m cruxsql` and the `cruxsql` command: the CLI, ending quietly on Ctrl-C at any moment.

Until the command runs, a Ctrl-C ends the process at once with status 130 (nothing has been done yet,
and no half-imported module can print a traceback); while it runs, Ctrl-C raises KeyboardInterrupt as
usual, so locks and temporary files are released on the way out, and the CLI ends with status 130.
"""

# the C module behind `signal`: importing `signal` itself builds its enums, a window a Ctrl-C can hit
import _signal  # type: ignore[import-not-found]  # (no stubs; the same functions as `signal`)
import os
import sys

INTERRUPTED_EXIT = 130


def _end_now(signum: int, frame: object) -> None:
    os._exit(INTERRUPTED_EXIT)


def run() -> None:
    _signal.signal(_signal.SIGINT, _end_now)
    from .cli import main

    _signal.signal(_signal.SIGINT, _signal.default_int_handler)
    try:
        main()
    except KeyboardInterrupt:
        _signal.signal(_signal.SIGINT, _end_now)
        sys.exit(INTERRUPTED_EXIT)
    finally:        # a Ctrl-C during the interpreter's shutdown (threads joined, files flushed) is quiet too
        _signal.signal(_signal.SIGINT, _end_now)


if __name__ == "__main__":
    run()
