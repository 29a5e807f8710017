#!/usr/bin/env bash
# ThreadSanitizer over dlinterop on free-threaded CPython 3.13 (by hand; not part of
# .ci/run, whose time it would double). Builds once per machine, cached outside the
# checkout ($DLINTEROP_TSAN_PREFIX, default ~/.cache/dlinterop/python3.13t-tsan), the same
# source as .ci/freethreaded-python.sh configured with --with-thread-sanitizer (gcc's
# libtsan); then dlinterop built with -fsanitize=thread into a venv of it, and the thread
# tests run under TSan with CPython's own suppressions. Prints the reports that name a
# dlinterop frame (reports inside uninstrumented NumPy wheels are not ours to read) and
# exits non-zero when there is one.
#   bash .ci/tsan.sh [pytest arguments]      (default: tests/threads)
set -euo pipefail
cd "$(dirname "$0")/.."
prefix="${DLINTEROP_TSAN_PREFIX:-$HOME/.cache/dlinterop/python3.13t-tsan}"
python="$prefix/bin/python3.13t"
work="${TMPDIR:-/tmp}/dlinterop-tsan"
if ! [ -x "$python" ]; then
  rm -rf "$work"
  mkdir -p "$work/apt/lists/partial" "$work/src"
  echo "deb-src http://deb.debian.org/debian trixie main" > "$work/apt/sources.list"
  apt_options=(-o "Dir::Etc::sourcelist=$work/apt/sources.list" -o "Dir::Etc::sourceparts=-"
               -o "Dir::State::Lists=$work/apt/lists" -o "APT::Get::List-Cleanup=0")
  apt-get "${apt_options[@]}" update >"$work/apt.log" 2>&1
  (cd "$work/src" && apt-get "${apt_options[@]}" source --download-only --only-source \
      python3.13 >>"$work/apt.log" 2>&1 && dpkg-source --skip-patches -x ./*.dsc \
      >>"$work/apt.log" 2>&1)
  source_dir=$(find "$work/src" -maxdepth 1 -mindepth 1 -type d -name 'python3.13*' | head -1)
  echo "TSan: building $(basename "$source_dir") into $prefix" >&2
  (cd "$source_dir" && ./configure --disable-gil --with-thread-sanitizer --prefix="$prefix" \
      >"$work/configure.log" 2>&1 && make -j"$(nproc)" >"$work/make.log" 2>&1 \
      && make install >"$work/install.log" 2>&1)
  mkdir -p "$prefix/share"
  cp "$source_dir/Tools/tsan/suppressions_free_threading.txt" "$prefix/share/"
fi
env="$work/venv"
rm -rf "$env"
"$python" -m venv "$env"
"$env/bin/python" -m pip install --quiet --only-binary=:all: "numpy>=2.2,<2.5" "pytest>=8" \
    "cython>=3.0" "scikit-build-core>=0.11" "cython-cmake>=0.3" ninja cmake
CFLAGS="-fsanitize=thread -g" LDFLAGS="-fsanitize=thread" "$env/bin/python" -m pip install \
    --quiet --no-build-isolation --no-deps -Ccmake.build-type=RelWithDebInfo \
    -Cbuild-dir="$work/build" .
log="$work/tsan"
rm -f "$log".*
# exitcode=0: a process with reports still exits as it would (the thread tests run some
# in subprocesses and check their exit status); the reports are read from the logs.
TSAN_OPTIONS="suppressions=$prefix/share/suppressions_free_threading.txt log_path=$log \
    halt_on_error=0 exitcode=0 second_deadlock_stack=1" PYTHON_GIL=0 \
    "$env/bin/python" -P -m pytest -q -p no:cacheprovider --run-slow "${@:-tests/threads}"
# A report is dlinterop's when the innermost frame (past libtsan's interceptors) of either
# access is in dlinterop's code; the others are CPython's own (its free-threaded dict
# lookups read an object's fields speculatively, by design) and are counted, not shown.
python3 - "$log" <<'PY'
import glob, re, sys
ours, theirs = [], 0
for path in sorted(glob.glob(sys.argv[1] + ".*")):
    for report in re.findall(r"^WARNING: ThreadSanitizer.*?^SUMMARY: ThreadSanitizer.*?$",
                             open(path).read(), re.S | re.M):
        accesses = re.split(r"^  (?=\S)", report, flags=re.M)[1:3]
        innermost = []
        for access in accesses:
            frames = [f for f in re.findall(r"^    #\d+ (.*)$", access, re.M)
                      if "libsanitizer" not in f and "libtsan" not in f]
            innermost.append(frames[0] if frames else "")
        if any(re.search(r"dlinterop|src/\w+\.(c|h|cu)\b", f) for f in innermost):
            ours.append(report)
        else:
            theirs += 1
for report in ours:
    print(report, end="\n\n")
print(f"TSan: {len(ours)} reports in dlinterop's code, {theirs} inside CPython "
      f"(logs: {sys.argv[1]}.*)")
sys.exit(1 if ours else 0)
PY
