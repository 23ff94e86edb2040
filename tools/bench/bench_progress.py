"""How soon a long cruxsql command shows its progress bar: seconds from starting the command, on a
pseudo-terminal (the bar is drawn only when stderr is a terminal), until the bar's first frame, beside
the time `cruxsql --help` takes to start and exit (interpreter start-up and imports: the floor).

    python tools/bench/bench_progress.py rebuild --data-dir DIR     # a rebuild over an existing view
    python tools/bench/bench_progress.py query deploy --data-dir DIR  # the first open of a journal

The command is killed once its bar shows (a rebuild is crash-atomic: the view stays as it was). For the
first open of a journal, point --data-dir at a directory holding only `facts.jsonl` (delete cruxsql.db*
between runs): this benchmark does not do it for you.
"""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import time


def first_frame_s(argv: list[str], timeout: float = 60.0) -> float:
    """Seconds until `argv` writes a progress bar frame (a '%') to its terminal stderr."""
    master, slave = pty.openpty()
    started = time.perf_counter()
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=slave)
    os.close(slave)
    seen = b""
    try:
        while b"%" not in seen:
            ready, _, _ = select.select([master], [], [], timeout)
            if not ready:
                raise SystemExit(f"no progress bar within {timeout:.0f} s from {' '.join(argv)}")
            try:
                chunk = os.read(master, 4096)
            except OSError:  # EIO: the command exited and closed its end of the terminal
                chunk = b""
            if not chunk:
                said = seen.decode("utf-8", "replace").strip().splitlines()
                raise SystemExit(f"no progress bar from {' '.join(argv)}: it exited with code {proc.wait()}"
                                 + (f" ({said[-1].strip()})" if said else ""))
            seen += chunk
        return time.perf_counter() - started
    finally:
        proc.kill()
        proc.wait()
        os.close(master)


def main() -> None:
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        return
    # this interpreter's cruxsql, not whichever `cruxsql` comes first on PATH
    cli = [sys.executable, "-m", "cruxsql"]
    started = time.perf_counter()
    helped = subprocess.run([*cli, "--help"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    floor = time.perf_counter() - started
    if helped.returncode != 0:
        said = helped.stderr.strip().splitlines()
        raise SystemExit(f"`{' '.join(cli)} --help` exited with code {helped.returncode}"
                         + (f" ({said[-1].strip()})" if said else ""))
    bar = first_frame_s([*cli, *sys.argv[1:]])
    print(f"{'measure':<44}{'cruxsql':>10}{'baseline':>10}{'ratio':>8}")
    print(f"{'first progress bar frame, s (vs --help)':<44}{bar:>10.3f}{floor:>10.3f}{bar / floor:>8.2f}")


if __name__ == "__main__":
    main()
