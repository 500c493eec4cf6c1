"""``python -m allocator``: the command line (docs/CLI.md)."""

import os
import sys

from allocator.cli import main
from allocator.collector import tune_for_one_run

tune_for_one_run()
status = main(one_shot=True)
# A one-shot process: once its output is out, the operating system takes its memory back at
# once, where tearing down a large snapshot's millions of objects one by one takes about a
# second (5,000 nodes: 0.9 s of 5 s).
try:
    sys.stdout.flush()
    sys.stderr.flush()
except BrokenPipeError:  # `... | head`: the reader has all it wanted
    pass
os._exit(status)
