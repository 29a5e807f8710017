"""dlinterop's optional integrations: how Tensors plug into libraries that may never be
used in a process, at no import cost.

- dask: Dask's sizeof, tokenize and distributed's serialization families, loaded by Dask
  through the `dask.sizeof` entry point (pyproject.toml), never by `import dlinterop`.
- multiprocessing: multiprocessing's reducers for shared Tensors (handles, not bytes),
  installed by `import dlinterop` and registered once multiprocessing is imported.
- cuda_ipc: CUDA IPC's protocol, how a CUDA Tensor is sent and received (multiprocessing's
  reducers use it); its native half is dlinterop/core/cuda_ipc.pxi.
- after_import: the hook dask and multiprocessing register through: a function run once a
  module has run, without importing it.
"""
