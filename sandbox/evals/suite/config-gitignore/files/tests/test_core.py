"""Placeholder module: tests/test_core.py."""
