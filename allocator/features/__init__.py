"""Kubernetes DRA features beyond the design's first scope, one module per feature (its device
checks, constraint kinds, validators and hooks); ``allocator/pipeline.py`` wires them into a
run according to its feature gates."""
