"""`python -m cruxsql` and the `cruxsql` command: the CLI, ending quietly on Ctrl-C at any moment.

Until the command runs, a Ctrl-C ends the process at once with status 130 (nothing has been done yet,
and no half-imported module can print a traceback); while it runs, Ctrl-C raises KeyboardInterrupt as
usual, so locks and temporary files are released on the way out, and the CLI ends with status 130 —
also when a library turned that KeyboardInterrupt into an error of its own (pydantic-core raises a
SchemaError when a Ctrl-C lands while it builds a validator).
"""

# the C module behind `signal`: importing `signal` itself builds its enums, a window a Ctrl-C can hit
import _signal  # type: ignore[import-not-found]  # (no stubs; the same functions as `signal`)
import os
import sys

INTERRUPTED_EXIT = 130


def _end_now(signum: int, frame: object) -> None:
    os._exit(INTERRUPTED_EXIT)


class _Interrupt:
    """The running command's SIGINT handler: KeyboardInterrupt, as Python's own, remembering it came."""

    came = False

    def __call__(self, signum: int, frame: object) -> None:
        self.came = True
        raise KeyboardInterrupt


def run() -> None:
    _signal.signal(_signal.SIGINT, _end_now)
    from .cli import main

    interrupt = _Interrupt()
    _signal.signal(_signal.SIGINT, interrupt)
    try:
        main()
    except KeyboardInterrupt:
        _signal.signal(_signal.SIGINT, _end_now)
        sys.exit(INTERRUPTED_EXIT)
    except Exception:
        if not interrupt.came:
            raise
        _signal.signal(_signal.SIGINT, _end_now)
        sys.exit(INTERRUPTED_EXIT)
    finally:        # a Ctrl-C during the interpreter's shutdown (threads joined, files flushed) is quiet too
        _signal.signal(_signal.SIGINT, _end_now)


if __name__ == "__main__":
    run()
