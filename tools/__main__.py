import sys

from sprue.tools.cli import main

sys.exit(main())
