"""Placeholder module: main.py."""
