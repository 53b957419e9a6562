"""Generic Kubernetes API machinery. Knows no kind by name: kinds declare themselves in registry."""
