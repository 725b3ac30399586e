"""The repository, the programs the tests run (the `sprue` command, the C compiler), and the
process's memory."""
import os
import sys
import threading
from pathlib import Path
from typing import Callable

REPO = Path(__file__).resolve().parents[2]        # tests/helpers/system.py -> the repository
SPRUE = Path(sys.executable).parent / "sprue"     # the command the package installs beside python
CC = os.environ.get("CC", "cc")


def run_in_threads(worker: Callable[[int], None], count: int) -> None:
    """worker(0), ..., worker(count - 1), each on a thread of its own, all started, then joined."""
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def rss_bytes() -> int:
    """This process's resident memory (Linux: /proc/self/statm)."""
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
