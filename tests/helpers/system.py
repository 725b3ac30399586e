"""The repository, the programs the tests run (the `sprue` command, the C compiler), and the
process's memory."""
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]        # tests/helpers/system.py -> the repository
SPRUE = Path(sys.executable).parent / "sprue"     # the command the package installs beside python
CC = os.environ.get("CC", "cc")


def rss_bytes() -> int:
    """This process's resident memory (Linux: /proc/self/statm)."""
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
