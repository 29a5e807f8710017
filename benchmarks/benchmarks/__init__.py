"""dlinterop's asv benchmarks (run `asv run --python=same --quick` from benchmarks/)."""
