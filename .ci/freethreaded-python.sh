#!/usr/bin/env bash
# Prints the path of a free-threaded CPython 3.13 (python3.13t, GIL disabled), building it
# once per machine as a new user would: Debian 13's python3.13 source package, fetched with
# apt's source download through a private sources list, unpacked without Debian's patches,
# then ./configure --disable-gil.
# Cached outside the checkout ($DLINTEROP_FT_PREFIX, default ~/.cache/dlinterop/python3.13t).
# Exits 3 (saying why on stderr) when the source cannot be had.
set -euo pipefail
prefix="${DLINTEROP_FT_PREFIX:-$HOME/.cache/dlinterop/python3.13t}"
python="$prefix/bin/python3.13t"
if [ -x "$python" ] && "$python" -c 'import sys; sys.exit(sys._is_gil_enabled())' 2>/dev/null; then
  echo "$python"
  exit 0
fi
work="${TMPDIR:-/tmp}/dlinterop-ft-build"
rm -rf "$work"
mkdir -p "$work/apt/lists/partial" "$work/src"
echo "deb-src http://deb.debian.org/debian trixie main" > "$work/apt/sources.list"
apt_options=(-o "Dir::Etc::sourcelist=$work/apt/sources.list" -o "Dir::Etc::sourceparts=-"
             -o "Dir::State::Lists=$work/apt/lists" -o "APT::Get::List-Cleanup=0")
if ! apt-get "${apt_options[@]}" update >"$work/apt.log" 2>&1 \
   || ! (cd "$work/src" && apt-get "${apt_options[@]}" source --download-only \
         --only-source python3.13 >>"$work/apt.log" 2>&1); then
  echo "free-threaded Python: Debian 13's python3.13 source package cannot be had here" \
       "($(tail -1 "$work/apt.log"))" >&2
  exit 3
fi
# Upstream CPython as the package holds it, without Debian's patches (which move
# site-packages to dist-packages and disable ensurepip, so that a venv would not work).
(cd "$work/src" && dpkg-source --skip-patches -x ./*.dsc >>"$work/apt.log" 2>&1)
source_dir=$(find "$work/src" -maxdepth 1 -mindepth 1 -type d -name 'python3.13*' | head -1)
echo "free-threaded Python: building $(basename "$source_dir") into $prefix" >&2
start=$SECONDS
(cd "$source_dir" && ./configure --disable-gil --prefix="$prefix" \
    >"$work/configure.log" 2>&1 \
  && make -j"$(nproc)" >"$work/make.log" 2>&1 && make install >"$work/install.log" 2>&1) || {
  echo "free-threaded Python: the build failed; see $work/*.log" >&2
  exit 3
}
echo "free-threaded Python: built in $((SECONDS - start)) s" >&2
rm -rf "$work"
echo "$python"
