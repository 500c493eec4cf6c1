"""``python -m allocator``: the command line (docs/CLI.md)."""

import sys

from allocator.cli import main, tune_gc

tune_gc()
sys.exit(main())
