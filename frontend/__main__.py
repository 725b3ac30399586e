"""`python -m sprue ...`: the `sprue` command line (sprue.tools.cli)."""
import sys

from sprue.tools.cli import main

sys.exit(main())
