"""Benchmarks of the performance figures (docs/figures.md); run ``python bench/bench_api.py``."""
