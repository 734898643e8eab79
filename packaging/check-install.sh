#!/usr/bin/env bash
# Checks that an installed workspace-agent needs no Swift toolchain (make install-check):
#  1. `ldd` lists no Swift runtime library (libswiftCore, Foundation, dispatch, ...);
#  2. it answers --version and --help with an empty environment (`env -i`, LD_LIBRARY_PATH
#     empty), and --version again with the toolchain's runtime libraries hidden: an empty
#     directory is mounted over their directory in a private mount namespace (`unshare
#     --mount`, as root), so nothing can be loaded from there even through a run path.
# Usage: packaging/check-install.sh path/to/workspace-agent
set -euo pipefail
binary=${1:?usage: $0 path/to/workspace-agent}
binary=$(readlink -f "$binary")
fail() { echo "check-install: FAIL: $*" >&2; exit 1; }

echo "check-install: $binary ($(du -h "$binary" | cut -f1))"
libraries=$(ldd "$binary") || fail "ldd failed"
if grep -Ei 'libswift|libFoundation|libdispatch|libBlocksRuntime|lib_Foundation|not found' <<<"$libraries"; then
    fail "the binary still needs the libraries above"
fi
echo "check-install: ldd lists no Swift library ($(wc -l <<<"$libraries") libraries, all from the system)"
if readelf -d "$binary" | grep -E 'RPATH|RUNPATH'; then
    echo "check-install: note: the binary carries a run path (above); the hidden-runtime run below covers it"
fi

run_checks() {
    local version help
    version=$("$@" env -i LD_LIBRARY_PATH= "$binary" --version) || fail "--version failed"
    [[ -n "$version" ]] || fail "--version printed nothing"
    help=$("$@" env -i LD_LIBRARY_PATH= "$binary" --help) || fail "--help failed"
    grep -q 'USAGE: workspace-agent' <<<"$help" || fail "--help printed no usage: $help"
    echo "$version"
}
version=$(run_checks)
echo "check-install: --version ($version) and --help answer under env -i"

# The toolchain's runtime libraries (…/usr/lib/swift/linux, libswiftCore.so and the rest), if
# a toolchain is installed: hidden under an empty directory for one more run.
if swift_bin=$(command -v swiftc 2>/dev/null || command -v swift 2>/dev/null); then
    runtime=$(readlink -f "$(dirname "$(readlink -f "$swift_bin")")/../lib/swift/linux")
    if [[ ! -e "$runtime/libswiftCore.so" ]]; then
        echo "check-install: note: no libswiftCore.so in $runtime: the hidden-runtime run was skipped"
    elif [[ "$(id -u)" -eq 0 ]] && unshare --mount --propagation private true 2>/dev/null; then
        empty=$(mktemp -d)
        trap 'rmdir "$empty"' EXIT
        hidden=$(unshare --mount --propagation private sh -c '
            mount --bind "$1" "$2" || exit 90
            [ ! -e "$2/libswiftCore.so" ] || exit 91
            env -i LD_LIBRARY_PATH= "$3" --version' sh "$empty" "$runtime" "$binary") ||
            fail "with $runtime hidden, --version failed (status $?)"
        echo "check-install: --version ($hidden) answers with the toolchain's runtime ($runtime) hidden"
    else
        echo "check-install: note: no private mount namespace here (not root, or a container): the hidden-runtime run was skipped"
    fi
fi
echo "check-install: ok"
