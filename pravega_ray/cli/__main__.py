"""``python -m pravega_ray.cli``: the same as the ``pravega-ray`` command."""

import sys

from pravega_ray.cli import main

sys.exit(main())
