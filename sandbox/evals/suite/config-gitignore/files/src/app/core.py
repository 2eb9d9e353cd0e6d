"""Placeholder module: src/app/core.py."""
