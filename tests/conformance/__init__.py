"""Upstream Kubernetes tests, ported (a package, so its conftest never shadows tests/conftest.py)."""
