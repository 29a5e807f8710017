"""A Dask job and a Ray job over dlinterop tensors (pip install "dlinterop[dask,ray]").

Each engine gets a local cluster of two worker processes, sends a Tensor to its workers,
runs tasks over it there and brings a Tensor back:

    python examples/dask_ray.py
"""

import numpy as np

import dlinterop as dl


def column_means(t):
    """A task: runs in a worker, on the Tensor it was given (NumPy views its memory)."""
    return dl.from_dlpack(np.from_dlpack(t).mean(axis=0))


def dask_job(t):
    from dask.sizeof import sizeof
    from distributed import Client, LocalCluster

    print(f"Dask sees the Tensor's {sizeof(t):,} bytes")  # memory limits and spilling count it
    with (
        LocalCluster(
            n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None
        ) as cluster,
        Client(cluster) as client,
    ):
        data = client.scatter(t)  # to a worker, once
        means = client.submit(column_means, data).result()
        print("Dask:", type(means).__name__, means.shape, np.from_dlpack(means)[:3])


def ray_job(t):
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        ref = ray.put(t)  # into the object store, once
        view = ray.get(ref)  # no copy: a read-only view of the store
        print("Ray: get is a read-only view:", view.readonly, view.shape)
        task = ray.remote(column_means)
        parts = ray.get([task.remote(ref) for _ in range(4)])  # four readers, one copy
        print("Ray:", len(parts), "results", np.from_dlpack(parts[0])[:3])
    finally:
        ray.shutdown()


if __name__ == "__main__":
    t = dl.from_dlpack(np.arange(1_000_000, dtype=np.float32).reshape(1000, 1000))
    dask_job(t)
    ray_job(t)
