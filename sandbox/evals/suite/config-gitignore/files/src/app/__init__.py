"""Placeholder module: src/app/__init__.py."""
