#!/usr/bin/env bash
# Checks an installed workspace-agent (make install-check).
#
# With --destdir, first the files beside the binary, read from the installed systemd unit:
#  - the unit is at UNIT under DESTDIR, sets no UMask= (the user's commands would inherit
#    it) and none of the sandboxing settings that would reach them (NoNewPrivileges= breaks
#    sudo, ProtectSystem= `sudo apt-get install`, ...: the unit's comments), and its TimeoutStopSec exceeds the agent's documented stop bound with stop scripts
#    at their default limit (7 s + 300 s + 12 s, docs/api/signals-and-shutdown.md);
#  - the EnvironmentFile= it names is under DESTDIR, mode 0600 (it may hold a token);
#  - every file:// document its Documentation= names is under DESTDIR;
#  - the binary its ExecStart= names is under DESTDIR (the checks below then run on it),
#    with a `coder` link to it beside it that answers as `coder`, unless --files-only.
# Then that the binary needs no Swift toolchain:
#  1. `ldd` lists no Swift runtime library (libswiftCore, Foundation, dispatch, ...);
#  2. it answers --version and --help with an empty environment (`env -i`, LD_LIBRARY_PATH
#     empty), and --version again with the toolchain's runtime libraries hidden: an empty
#     directory is mounted over their directory in a private mount namespace (`unshare
#     --mount`, as root), so nothing can be loaded from there even through a run path.
# Usage: packaging/check-install.sh path/to/workspace-agent
#        packaging/check-install.sh --destdir DESTDIR UNIT [--files-only]
#        (UNIT: the unit's installed path, e.g. /usr/local/lib/systemd/system/workspace-agent.service)
set -euo pipefail
fail() { echo "check-install: FAIL: $*" >&2; exit 1; }

# The documented stop bound, in seconds, with run_on_stop scripts at the default limit.
stop_bound=$((7 + 300 + 12))

# Prints the value of `Key=` lines of the unit (one per line).
unit_values() { sed -n "s/^$2=//p" "$1"; }

# Checks the unit and the files it names; prints the installed binary's path.
check_files() {
    local destdir=$1 unit=$2 path value seconds
    [[ -f "$destdir$unit" ]] || fail "no unit at $destdir$unit"
    ! grep -q '^UMask=' "$destdir$unit" || fail "the unit sets UMask= (the user's commands inherit it)"
    value=$(grep -E '^(NoNewPrivileges|RestrictSUIDSGID|ProtectSystem|ProtectHome|ProtectKernel[A-Za-z]*|ProtectControlGroups|ProtectClock|ProtectHostname|ProtectProc|PrivateTmp|PrivateDevices|PrivateNetwork|PrivateUsers|RestrictRealtime|RestrictAddressFamilies|RestrictNamespaces|SystemCallFilter|SystemCallArchitectures|LockPersonality|MemoryDenyWriteExecute|CapabilityBoundingSet|LimitNOFILE)=' "$destdir$unit" | grep -vE '=(no|false|off|0)$' || true)
    [[ -z "$value" ]] || fail "the unit sets what reaches the user's commands (sudo, apt-get, ...): $value"
    value=$(unit_values "$destdir$unit" TimeoutStopSec)
    # `330`, `330s` or `6min` (what this check reads; systemd takes more forms).
    case "$value" in
        *min) seconds=${value%min}; [[ "$seconds" =~ ^[0-9]+$ ]] && seconds=$((seconds * 60)) ;;
        *) seconds=${value%s} ;;
    esac
    [[ "$seconds" =~ ^[0-9]+$ ]] || fail "TimeoutStopSec=$value is not N, Ns or Nmin"
    (( seconds > stop_bound )) || fail "TimeoutStopSec=$value does not exceed the agent's stop bound ($stop_bound s)"
    echo "check-install: unit $unit: no UMask=, no sandboxing, TimeoutStopSec=$value > $stop_bound s" >&2
    while read -r path; do
        [[ -n "$path" ]] || continue
        path=${path#-}
        [[ -f "$destdir$path" ]] || fail "EnvironmentFile $path is not installed"
        [[ "$(stat -c %a "$destdir$path")" == 600 ]] || fail "EnvironmentFile $path has mode $(stat -c %a "$destdir$path"), not 600"
        echo "check-install: environment file $path (0600)" >&2
    done < <(unit_values "$destdir$unit" EnvironmentFile)
    for value in $(unit_values "$destdir$unit" Documentation); do
        case "$value" in
            file://*) path=${value#file://}
                [[ -f "$destdir$path" ]] || fail "Documentation $value is not installed"
                echo "check-install: documentation $path" >&2 ;;
        esac
    done
    value=$(unit_values "$destdir$unit" ExecStart)
    echo "$destdir${value%% *}"
}

if [[ "${1:-}" == --destdir ]]; then
    destdir=${2:?usage: $0 --destdir DESTDIR UNIT [--files-only]}
    unit=${3:?usage: $0 --destdir DESTDIR UNIT [--files-only]}
    binary=$(check_files "$destdir" "$unit")
    if [[ "${4:-}" == --files-only ]]; then
        echo "check-install: ok (files only)"
        exit 0
    fi
    [[ -x "$binary" ]] || fail "the unit's ExecStart binary is not installed at $binary"
    coder="$(dirname "$binary")/coder"
    [[ -L "$coder" && "$(readlink "$coder")" == workspace-agent ]] || fail "no coder link to workspace-agent beside $binary"
    grep -q 'USAGE: coder' <<<"$(env -i LD_LIBRARY_PATH= "$coder" --help)" || fail "$coder --help printed no coder usage"
    echo "check-install: $coder -> workspace-agent answers as coder" >&2
else
    binary=${1:?usage: $0 path/to/workspace-agent, or $0 --destdir DESTDIR UNIT [--files-only]}
fi
binary=$(readlink -f "$binary")

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
