"""The commands of `python -m dlinterop` (dlinterop/__main__.py parses the arguments):
`info`, the report of what was built and a round trip with each installed framework
(report), and `bench`, a quick benchmark beside NumPy and PyTorch (bench). `check` is the
conformance checker's own (dlinterop/testing/_cli.py)."""
