"""Kubernetes DRA features beyond the design's first scope, as small modules the DFS consults."""
