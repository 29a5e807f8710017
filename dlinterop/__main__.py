"""python -m dlinterop: build facts, then a round trip with each installed framework."""
import sys

from dlinterop._report import main

if __name__ == "__main__":
    sys.exit(main())
