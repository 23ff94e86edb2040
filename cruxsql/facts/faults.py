"""Crash points for crash tests: a real SIGKILL at a named step, armed only by an environment variable.

`CRUXSQL_TEST_CRASH_AT=<step>` makes the process kill itself when it reaches `crash_point(<step>)`;
unset (always, outside tests), a crash point costs one dictionary lookup.
"""

from __future__ import annotations

import os
import signal

CRASH_ENV = "CRUXSQL_TEST_CRASH_AT"


def crash_point(step: str) -> None:
    if os.environ.get(CRASH_ENV) == step:
        os.kill(os.getpid(), signal.SIGKILL)
