"""``nbgrader ARGS`` as ``python -m nboracle.classroom.nbgrader_command ARGS``: ended once its work is done.

nbgrader's own command returns from its work, then Python tears down every module it imported before the process
ends. An autograde run has imported PyTorch (the grader's references and checks), whose teardown alone costs about
a second of every command (measured 2026-12-07, one student of 01_two_keys: 8.2 s with it, 7.1 s without), and
nothing in it is the command's work: the notebooks, the gradebook and the log are written and closed before
nbgrader returns. So this runs nbgrader's ``main`` as its console script does, then what any exiting Python
process runs (the threads it must wait for, the ``atexit`` handlers: logging's flush, temporary folders' removal,
a pool's clean-up), flushes the standard streams, and ends the process with nbgrader's exit status.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading


def exit_status(code: object) -> int:
    """The process's exit status for ``SystemExit(code)``, as Python's own exit gives it (a message: printed, 1)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


def main() -> None:
    from nbgrader.apps.nbgraderapp import main as nbgrader_main

    sys.argv[0] = "nbgrader"
    try:
        code = nbgrader_main()
    except SystemExit as stop:
        code = stop.code
    status = exit_status(code)
    for thread in threading.enumerate():  # as Python's exit: the threads that are not daemons end first
        if thread is not threading.current_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # closed or gone: nothing left to write there
            pass
    os._exit(status)


if __name__ == "__main__":
    main()
