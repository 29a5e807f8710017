"""dlinterop's benchmarks: the asv suite in benchmarks/benchmarks and the side-by-side runner.

Kept empty so that importing the asv suite as benchmarks.benchmarks pulls in nothing else.
"""
