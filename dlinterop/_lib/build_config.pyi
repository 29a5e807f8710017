# dlinterop/_lib/build_config.py is written by CMake at build time (from build_config.py.in).
cython_version: str
cuda_built: bool
cuda_toolkit_version: str | None
numpy_route_built: bool
cuda_option: str
numpy_option: str
