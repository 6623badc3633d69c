"""Benchmarks of the figures the performance issue asks for; run ``python bench/bench_api.py``."""
