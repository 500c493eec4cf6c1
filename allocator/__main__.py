"""``python -m allocator``: the command line (CONTRACT section 2)."""

import sys

from allocator.cli import main, tune_gc

tune_gc()
sys.exit(main())
