"""A worker's tie to its master: it exits when the master dies (``scholar-es serve --workers N``).

The master (:mod:`scholar_es.serve.run`) passes its process id in ``MASTER_PID_ENV``; each worker's
app (:mod:`scholar_es.serve.app`) calls :func:`exit_with_parent` with it at startup, so a master
killed with SIGKILL leaves no worker serving on the port.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

MASTER_PID_ENV = "SCHOLAR_ES_SERVE_MASTER_PID"
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def exit_with_parent(parent_pid: int) -> None:
    """Make this worker get SIGTERM (a graceful stop) when ``parent_pid``, its master, dies.

    Linux: ``prctl(PR_SET_PDEATHSIG, SIGTERM)``, then a check that the master did not die before
    the call. Elsewhere: a daemon thread polls the parent id once a second."""
    if sys.platform.startswith("linux"):
        import ctypes

        try:
            libc = ctypes.CDLL(None, use_errno=True)
            armed = libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0) == 0
        except (OSError, AttributeError):
            armed = False
        if armed:
            if os.getppid() != parent_pid:  # the master died before the signal was armed
                os.kill(os.getpid(), signal.SIGTERM)
            return

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(1.0)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="scholar-es-parent-watch", daemon=True).start()
