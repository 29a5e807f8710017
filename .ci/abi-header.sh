#!/usr/bin/env bash
# The stable ABI's header (include/dlinterop/abi.h) compiles without a warning under the
# strictest settings of gcc and clang, as C and as C++: a downstream project that builds with
# -Werror and every warning on must not fail on dlinterop's header. .ci/abi/every_entry.c
# calls every entry; it is compiled for each target (the default 1.0, 1.1, the newer
# entries checked at run time) and with the Limited API. clang is PyPI's ziglang (zig cc is
# clang), in a virtualenv of its own under $TMPDIR; Python's headers are system headers
# (-isystem): their warnings are CPython's, not the header's.
#
# Usage: bash .ci/abi-header.sh     exit status non-zero at the first warning
set -euo pipefail
cd "$(dirname "$0")/.."
export PIP_DISABLE_PIP_VERSION_CHECK=1
ziglang=0.17.1

tools="${TMPDIR:-/tmp}/dlinterop-abi-header-tools"
[ -x "$tools/bin/python" ] || python -m venv "$tools"
"$tools/bin/python" -m pip install --quiet "ziglang==$ziglang"
python_include=$(python -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
out="${TMPDIR:-/tmp}/dlinterop-abi-header.o"

gcc_c=(-std=c11 -Wall -Wextra -Wpedantic -Wconversion -Wsign-conversion -Wshadow -Wcast-qual
       -Wcast-align=strict -Wstrict-prototypes -Wmissing-prototypes -Wold-style-definition
       -Wredundant-decls -Wundef -Wwrite-strings -Wdouble-promotion -Wformat=2
       -Wnull-dereference -Wswitch-enum -Wbad-function-cast -Werror)
gcc_cxx=(-std=c++17 -Wall -Wextra -Wpedantic -Wconversion -Wsign-conversion -Wshadow
         -Wcast-qual -Wcast-align=strict -Wold-style-cast -Wuseless-cast
         -Wzero-as-null-pointer-constant -Wredundant-decls -Wundef -Wformat=2
         -Wnull-dereference -Wextra-semi -Wswitch-enum -Werror)
# Every clang warning, but for three about what the header cannot change: Python's own
# macros that expand themselves (Py_DECREF), C++98 compatibility (C++11 is the oldest
# dialect anyone builds Python extensions in) and the buffer-hardening notes on plain
# pointer arithmetic.
clang_all=(-Weverything -Werror -Wno-disabled-macro-expansion -Wno-c++98-compat
           -Wno-c++98-compat-pedantic -Wno-unsafe-buffer-usage)

compile() {
  local label=$1; shift
  "$@" -c -o "$out" -Iinclude -isystem "$python_include" .ci/abi/every_entry.c \
    || { echo "abi.h: warnings with $label"; exit 1; }
}

for defines in "" "-DDLINTEROP_TARGET_MINOR=1" "-DDLINTEROP_ALLOW_NEWER_ENTRIES" \
               "-DPy_LIMITED_API=0x030A0000"; do
  # shellcheck disable=SC2086  # $defines: zero words or one
  set -- $defines
  compile "gcc C $*" gcc -x c "${gcc_c[@]}" "$@"
  compile "g++ $*" g++ -x c++ "${gcc_cxx[@]}" "$@"
  compile "clang C $*" "$tools/bin/python" -m ziglang cc -x c -std=c11 "${clang_all[@]}" "$@"
  compile "clang++ $*" "$tools/bin/python" -m ziglang c++ -x c++ -std=c++17 "${clang_all[@]}" "$@"
done
echo "abi.h: no warning from gcc $(gcc -dumpversion) and clang (zig $ziglang), C and C++," \
     "for each target"
