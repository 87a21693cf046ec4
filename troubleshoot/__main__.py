"""`python -m troubleshoot ...` is `llmfix ...`; ``run`` is the console script."""
from __future__ import annotations

import atexit
import os
import sys

from .cli import main


def run() -> None:
    """The command line, then an exit that skips tearing the interpreter down.

    Freeing every module and object one by one at exit costs a warm `llmfix ask` about as much as
    starting Python. Once the command is done and its output flushed, nothing is left to do unless
    a library registered an exit handler or started a thread that must finish: then (or when the
    output cannot be flushed) Python exits the ordinary way."""
    try:
        main()
        code = 0
    except SystemExit as stop:
        code = stop.code
    if (code is None or isinstance(code, int)) and _nothing_left():
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except (AttributeError, OSError, ValueError):
            sys.exit(code)
        os._exit(code or 0)
    sys.exit(code)


def _nothing_left() -> bool:
    """No other thread runs and no exit handler is registered (CPython counts them; elsewhere
    assume there are some)."""
    threading = sys.modules.get("threading")
    return (threading is None or threading.active_count() == 1) and getattr(atexit, "_ncallbacks", lambda: 1)() == 0


if __name__ == "__main__":
    run()
