"""``python -m benchmarks.append_throughput``: run the benchmark (see the package's docstring)."""

import sys

from benchmarks.append_throughput.cli import main

sys.exit(main())
