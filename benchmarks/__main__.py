"""python -m benchmarks: the side-by-side runner (see compare.py)."""

import sys

from benchmarks.compare import main

sys.exit(main())
