"""Follows docs/cython.md literally, as a reader would, in a fresh virtualenv.

    python tests/docs/cython_guide.py --wheel dist/dlinterop-0.1.0-cp311-cp311-linux_x86_64.whl
    python tests/docs/cython_guide.py          # builds dlinterop from this checkout (slow)

The reader's starting point is a virtualenv with dlinterop installed, so the script makes a
new one in a temporary folder (no system site-packages) and installs dlinterop there: the
wheel given, or else this checkout (an isolated source build, minutes). Everything else
comes from the page, in page order:

* a block after a line "`PATH`:" is a file the reader writes: it is written to PATH, under
  the folder the commands start in;
* every ```bash block runs there, unchanged, in its own `bash -e` (so its `cd` lines are the
  page's, and any failing command fails the guide), with the virtualenv first on PATH as if
  activated: the `pip install` lines the page gives are the only other installs;
* a `#> TEXT` line in a bash block is a line its commands must print; the page's lines must
  appear in order in the block's standard output.

A block of another kind (code the reader is shown but not told where to put) is an error:
the guide must be followable literally. Exit status 0 when every step passed.
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
PAGE = os.path.join(REPO, "docs", "cython.md")
sys.path.insert(0, HERE)
from mdblocks import blocks, expected_output  # noqa: E402


class GuideError(Exception):
    pass


def steps(text):
    """[("file", path, body) | ("bash", None, body)] of the page, in order."""
    out = []
    for language, body, needs, path in blocks(text):
        if needs is not None:
            raise GuideError(f"a <!-- needs: {needs} --> block: the guide must run anywhere")
        if path is not None:
            if os.path.isabs(path) or ".." in path.split("/"):
                raise GuideError(f"file block {path!r}: not a relative path inside the folder")
            out.append(("file", path, body))
        elif language == "bash":
            out.append(("bash", None, body))
        else:
            raise GuideError(
                f"a ```{language} block with no file name before it: the reader "
                "cannot tell where it goes"
            )
    return out


def run(command, **kwargs):
    proc = subprocess.run(command, capture_output=True, text=True, **kwargs)
    if proc.returncode != 0:
        raise GuideError(
            f"{command!r} exited {proc.returncode}\n--- stdout\n"
            f"{proc.stdout[-4000:]}\n--- stderr\n{proc.stderr[-6000:]}"
        )
    return proc


def venv_environment(venv):
    env = {
        k: v
        for k, v in os.environ.items()
        if k
        not in (
            "PYTHONPATH",
            "PYTHONHOME",
            "PYTHONSTARTUP",
            "VIRTUAL_ENV",
            "CONDA_PREFIX",
            "PIP_TARGET",
            "PIP_PREFIX",
            "PIP_USER",
        )
    }
    env["VIRTUAL_ENV"] = venv
    env["PATH"] = os.path.join(venv, "bin") + os.pathsep + env.get("PATH", "")
    env["PYTHONNOUSERSITE"] = "1"
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def check_printed(block, stdout):
    """Each expected line, in order, among the block's printed lines."""
    printed = [line.rstrip() for line in stdout.splitlines()]
    at = 0
    for want in expected_output(block):
        want = want.rstrip()
        try:
            at = printed.index(want, at) + 1
        except ValueError:
            raise GuideError(
                f"expected the line {want!r} (in order) in the output of\n{block}"
                f"\n--- it printed\n{stdout[-4000:]}"
            ) from None


def follow(wheel, root, log):
    with open(PAGE, encoding="utf-8") as f:
        plan = steps(f.read())
    if not any(kind == "bash" for kind, _, _ in plan):
        raise GuideError("the page has no ```bash block to run")
    venv = os.path.join(root, "venv")
    work = os.path.join(root, "work")
    os.makedirs(work)
    started = time.monotonic()
    run([sys.executable, "-m", "venv", venv])
    env = venv_environment(venv)
    python = os.path.join(venv, "bin", "python")
    if wheel:
        run([python, "-m", "pip", "install", "--quiet", wheel], env=env)
    else:  # a source build, its build folder kept out of the checkout
        run(
            [
                python,
                "-m",
                "pip",
                "install",
                "--quiet",
                "--config-settings=build-dir=" + os.path.join(root, "build"),
                REPO,
            ],
            env=env,
        )
    log(f"virtualenv with dlinterop from {wheel or REPO}: {time.monotonic() - started:.0f} s")
    where = run(["bash", "-c", "command -v python; command -v pip"], cwd=work, env=env).stdout
    if any(not line.startswith(os.path.join(venv, "bin")) for line in where.split()):
        raise GuideError(f"python or pip outside the virtualenv:\n{where}")
    for kind, path, body in plan:
        if kind == "file":
            target = os.path.join(work, path)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with open(target, "w", encoding="utf-8") as f:
                f.write(body)
            log(f"wrote {path}")
            continue
        t0 = time.monotonic()
        proc = run(["bash", "-e", "-c", body], cwd=work, env=env, timeout=600)
        check_printed(body, proc.stdout)
        first = next(line for line in body.splitlines() if line.strip())
        log(f"ran the block starting `{first}`: {time.monotonic() - t0:.0f} s")
    log(f"docs/cython.md followed literally: {time.monotonic() - started:.0f} s")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--wheel", help="the dlinterop wheel to install (default: build this checkout, slow)"
    )
    parser.add_argument(
        "--keep", action="store_true", help="keep the temporary folder (its path is printed)"
    )
    args = parser.parse_args(argv)
    wheel = os.path.abspath(args.wheel) if args.wheel else None
    if wheel and not os.path.isfile(wheel):
        parser.error(f"--wheel {args.wheel}: no such file")
    root = tempfile.mkdtemp(prefix="dlinterop-cython-guide-")
    try:
        follow(wheel, root, lambda line: print(line, flush=True))
    except (GuideError, subprocess.TimeoutExpired) as e:
        print(f"docs/cython.md cannot be followed as written: {e}", file=sys.stderr)
        return 1
    finally:
        if args.keep:
            print(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
