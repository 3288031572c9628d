"""The collector around a lab process's start and end (``lab.component.heap``)."""

from __future__ import annotations

import gc
import subprocess
import sys

from lab.component.heap import collector_paused


def test_the_collector_is_paused_inside_and_as_before_after() -> None:
    assert gc.isenabled()
    with collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # it was off before: it stays off
    finally:
        gc.enable()


EXITING = """
import atexit, logging, sys, threading, time
from lab.component.heap import exit_now

logging.basicConfig(stream=sys.stderr, format="%(message)s")
atexit.register(lambda: print("atexit ran"))
done = threading.Event()

def work():
    done.wait()
    print("thread finished")

threading.Thread(target=work).start()
import concurrent.futures
pool = concurrent.futures.ThreadPoolExecutor(2)  # never shut down: its idle workers must end
pool.submit(print, "pool ran").result()
print("buffered, unflushed", end=" ")
logging.getLogger("t").warning("logged")
threading.Timer(0.1, done.set).start()
exit_now(3)
"""


def test_exit_now_ends_the_process_as_a_normal_exit_would() -> None:
    # bounded only so that a hang (a worker never told to end) fails instead of hanging
    done = subprocess.run(
        [sys.executable, "-c", EXITING], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 3
    # the non-daemon thread was joined, then atexit ran, then stdout was flushed
    assert done.stdout == "pool ran\nbuffered, unflushed thread finished\natexit ran\n"
    assert done.stderr == "logged\n"
