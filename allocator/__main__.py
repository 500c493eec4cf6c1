"""``python -m allocator``: the command line (CONTRACT section 2)."""

import gc
import sys

from allocator.cli import main

# A one-shot process that builds a big object graph (a 5,000-node snapshot is millions of
# objects) and then allocates briskly: with the default thresholds the collector walks the
# whole graph again and again (a quarter of workload (a)'s time, issue 11). Collected rarely
# instead; peak memory does not grow measurably (bench/scale_bench.py prints it).
gc.set_threshold(50_000, 50, 50)

sys.exit(main())
