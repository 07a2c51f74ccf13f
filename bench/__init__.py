"""Benchmarks (on demand, not part of the test suite): `python -m bench` runs the peer
comparison (bench/peers/), `bench/bench_engine.py` the engine figures.
"""
