"""Benchmarks of RAM (``make bench``); see bench/__main__.py."""
