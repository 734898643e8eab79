#!/usr/bin/env bash
# Runs one fuzz target (agent-fuzz, built by `make fuzz-build`, with FUZZ_TARGET set) and
# prints one summary line:
#   <target> runs=<N> result=<ok|FINDING> log=<file>
# Usage: Fuzz/run.sh TARGET RUNS MAX_SECONDS OUT_DIR [corpus|smoke]
# - corpus: new inputs go to OUT_DIR/corpus/TARGET (kept between runs), seeded from
#   Fuzz/Seeds/TARGET; smoke: a fresh scratch corpus, seeds read only.
# Crashes, timeouts and out-of-memory inputs go to OUT_DIR/crashes/ (never the repo root);
# the log to OUT_DIR/logs/TARGET.log (TARGET-smoke.log). FUZZ_RSS_LIMIT_MB: default 2560.
set -uo pipefail
target=$1 runs=$2 seconds=$3 out=$4 mode=${5:-corpus}
here=$(cd "$(dirname "$0")" && pwd)
binary="$here/.build/release/agent-fuzz"
seeds="$here/Seeds/$target"
mkdir -p "$out/crashes" "$out/logs"
suffix=
if [ "$mode" = smoke ]; then
	corpus="$out/smoke/$target"
	suffix=-smoke
	rm -rf "$corpus"
else
	corpus="$out/corpus/$target"
fi
mkdir -p "$corpus"
dirs=("$corpus")
[ -d "$seeds" ] && dirs+=("$seeds")
log="$out/logs/$target$suffix.log"
# The Swift runtime's backtracer would hold a crashing run for a while: libFuzzer reports.
# Leak checks are off: the Swift runtime keeps caches that LeakSanitizer reports.
FUZZ_TARGET="$target" SWIFT_BACKTRACE=enable=no ASAN_OPTIONS=detect_leaks=0:abort_on_error=0 \
	"$binary" -runs="$runs" -max_total_time="$seconds" -timeout=20 -rss_limit_mb="${FUZZ_RSS_LIMIT_MB:-2560}" -max_len=8192 \
	-detect_leaks=0 -print_final_stats=1 -artifact_prefix="$out/crashes/$target-" "${dirs[@]}" >"$log" 2>&1
status=$?
done_runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
if [ $status -eq 0 ]; then result=ok; else result=FINDING; fi
echo "$target runs=${done_runs:-0} result=$result log=$log"
exit $status
