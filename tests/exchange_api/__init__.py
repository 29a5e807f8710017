"""The DLPack 1.3 C exchange API: dlinterop's table, published and consumed (DLPackExchangeAPI,
include/dlpack/dlpack.h). Shared helpers in helpers.py, the compiled C consumer in
conftest.py."""
