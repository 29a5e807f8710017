"""Import time of dlinterop, in a fresh interpreter each time."""

import re
import statistics
import subprocess
import sys
import tempfile

from .common import Benchmark


class Import(Benchmark):
    def timeraw_import_dlinterop(self):
        return "import dlinterop"

    def timeraw_import_dlinterop_cuda(self):
        # dl.cuda is loaded on first use; with no GPU it must still import.
        return "import dlinterop.cuda"


class ImportTime(Benchmark):
    """`python -X importtime`'s cumulative figure for dlinterop (median of five runs): the
    import alone, without interpreter start-up."""

    timeout = 120

    def track_importtime(self):
        samples = []
        for _ in range(5):
            out = subprocess.run(
                [sys.executable, "-X", "importtime", "-c", "import dlinterop"],
                capture_output=True,
                text=True,
                check=True,
                cwd=tempfile.gettempdir(),
            )
            cumulative = None
            for line in out.stderr.splitlines():
                match = re.match(r"import time:\s*\d+\s*\|\s*(\d+)\s*\|\s*dlinterop\s*$", line)
                if match:
                    cumulative = int(match.group(1)) / 1000
            if cumulative is None:
                raise RuntimeError("python -X importtime printed no line for dlinterop")
            samples.append(cumulative)
        return statistics.median(samples)

    track_importtime.unit = "ms"
