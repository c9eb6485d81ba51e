"""`python -m cputune.supervise COMMAND…`: run COMMAND and start it again whenever it exits, until told to stop.

For the Celery worker where no process manager restarts it (`make run`, the fault drills): with celery/kombu 5.7.0
a worker whose broker drops while a late-acknowledged task runs stops with "Unrecoverable error" once its tasks
end. Its unacknowledged tasks stay in the broker and are redelivered; what is missing is a worker to take them.
SIGTERM or SIGINT stops the child (and this) for good. Restarts back off from 1 s to 30 s while the command keeps
exiting within a minute of its start. Django is never imported here.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time

BACKOFF_MAX_S = 30.0
HEALTHY_AFTER_S = 60.0  # a run this long resets the backoff


def say(message: str) -> None:
    print(f"[supervise] {message}", file=sys.stderr, flush=True)


def supervise(command: list[str]) -> int:
    stopping = False
    child: subprocess.Popen[bytes] | None = None

    def stop(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True
        if child is not None and child.poll() is None:
            child.send_signal(signum)  # also sent to our process group by a terminal; once more is harmless

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    backoff_s = 1.0
    while True:
        started = time.monotonic()
        child = subprocess.Popen(command)
        code = child.wait()
        if stopping:
            return code
        if time.monotonic() - started >= HEALTHY_AFTER_S:
            backoff_s = 1.0
        say(f"{command[0]} exited with status {code}; starting it again in {backoff_s:g} s")
        deadline = time.monotonic() + backoff_s
        while not stopping and time.monotonic() < deadline:
            time.sleep(0.1)
        if stopping:
            return code
        backoff_s = min(BACKOFF_MAX_S, backoff_s * 2)


def main(argv: list[str]) -> int:
    command = argv[1:]
    if command[:1] == ["--"]:
        command = command[1:]
    if not command:
        print("usage: python -m cputune.supervise COMMAND [ARG…]", file=sys.stderr)
        return 2
    return supervise(command)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
