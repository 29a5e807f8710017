"""python -m dlinterop: build facts, then a round trip with each installed framework."""
import sys

from dlinterop._report import main

sys.exit(main())
