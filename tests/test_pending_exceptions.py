"""A rejected import never lets a foreign destructor run with dlinterop's exception pending.

When dl.from_dlpack(obj) rejects the capsule obj.__dlpack__() returned, dlinterop holds its
last reference, so the capsule dies inside the import. A producer whose destructor or
deleter is Python code (ctypes, as here, or any pure-Python producer) breaks if it runs while
an exception is pending: CPython replaces the exception with a SystemError and the deleter
may not run (the numpy/numpy#32697 class of bug). The forged capsules record every call
that found an exception pending (forge.PENDING_SEEN).

Each case runs in a subprocess: Python code run with an exception pending can crash the
interpreter, and a crash must fail one test, not the run.
"""

import json
import os
import subprocess
import sys
import textwrap

import pytest

SUPPORT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "support")

# Forge arguments for a capsule dlinterop must reject, by reason.
REJECTED = {
    "major version 2": dict(version=(2, 0)),
    "unknown dtype code": dict(dtype=(99, 32, 1)),
    "multi-lane dtype": dict(dtype=(2, 32, 4)),
    "unknown device type": dict(device=(99, 0)),
    "negative device id": dict(device=(1, -1)),
    "negative ndim": dict(ndim=-1),
    "ndim over 64": dict(ndim=65),
    "NULL shape": dict(null_shape=True),
    "negative dimension": dict(shape=(2, -3)),
    "element count overflow": dict(shape=(2**40, 2**40), data=4096),
    "NULL data": dict(data=None),
    "extent overflow": dict(shape=(2, 3), strides=(2**62, 1), data=4096),
    "legacy unknown dtype": dict(versioned=False, dtype=(99, 32, 1)),
    "legacy NULL shape": dict(versioned=False, null_shape=True),
    "wrong capsule name": dict(name="not_a_dltensor"),
    "already consumed": dict(name="used_dltensor_versioned"),
}

# How the import is asked for; each takes the __dlpack__ route with a capsule only
# dlinterop holds.
CALLS = {
    "from_dlpack": "dl.from_dlpack(p)",
    "from_dlpack keywords": "dl.from_dlpack(p, copy=False, device='cpu')",
    "from_dlpack copy": "dl.from_dlpack(p, copy=True)",
    "asarray": "dl.asarray(p)",
}

SCRIPT = """
import json, sys
sys.path.insert(0, {support_dir!r})
import dlinterop as dl
import forge

class HandOver:
    # A producer that gives the capsule's only reference away.
    def __init__(self, kwargs):
        self.kwargs = kwargs
        self.forged = []      # keeps every forged tensor's memory alive

    def __dlpack__(self, **_):
        f = forge.forge(**self.kwargs)
        self.forged.append(f)
        capsule = f.capsule
        f.capsule = None
        return capsule

    def __dlpack_device__(self):
        return tuple(self.kwargs.get("device", (1, 0)))

results = {{}}
for reason, kwargs in json.loads({cases!r}).items():
    p = HandOver(kwargs)
    try:
        {call}
        error = None
    except Exception as e:
        error = type(e).__name__ + ": " + str(e)
    calls = [f.deleter_calls for f in p.forged]
    results[reason] = dict(error=error, deleter_calls=calls,
                           pending=list(forge.PENDING_SEEN))
    del forge.PENDING_SEEN[:]
print(json.dumps(results))
"""


def run_cases(cases, call):
    code = SCRIPT.format(support_dir=SUPPORT_DIR, cases=json.dumps(cases), call=call)
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    # ctypes reports a callback that failed (a SystemError from running with an exception
    # pending) as "Exception ignored on calling ctypes callback function".
    assert "Exception ignored" not in out.stderr, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("call", sorted(CALLS))
def test_rejected_capsule_dies_with_no_exception_pending(call):
    results = run_cases(REJECTED, CALLS[call])
    for reason, r in results.items():
        assert r["pending"] == [], (reason, r)
        assert r["error"] is not None and not r["error"].startswith("SystemError"), (reason, r)
        assert r["error"].split(":")[0] in ("BufferError", "ValueError", "CopyError"), (reason, r)
        # A rejected capsule keeps its name, so its own destructor calls the deleter, once.
        # (A capsule forged with a used_* name owns nothing: its deleter never runs.)
        expected = 0 if reason == "already consumed" else 1
        assert r["deleter_calls"] == [expected] * len(r["deleter_calls"]), (reason, r)
        assert len(r["deleter_calls"]) >= 1, (reason, r)


def test_tensor_dropped_on_a_later_error_releases_its_capsule_with_no_exception_pending():
    # Consumed, then refused: the producer ignores dl_device and the copy is forbidden, so
    # the Tensor (owning the capsule) dies with CopyError pending.
    results = run_cases(
        {"wrong device": dict(device=(1, 0))}, "dl.from_dlpack(p, device=(3, 0), copy=False)"
    )
    r = results["wrong device"]
    assert r["error"].startswith("CopyError"), r
    assert r["pending"] == [] and r["deleter_calls"] == [1], r


def test_accepted_capsule_still_calls_its_deleter_once():
    # The same producer, accepted: the deleter runs when the Tensor dies, not before.
    code = f"""
import sys
sys.path.insert(0, {SUPPORT_DIR!r})
import dlinterop as dl, forge
f = forge.forge((2, 3))
capsule = f.capsule
f.capsule = None
t = dl.from_dlpack(capsule)
del capsule
assert f.deleter_calls == 0
del t
assert f.deleter_calls == 1 and forge.PENDING_SEEN == [], forge.PENDING_SEEN
print("ok")
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
