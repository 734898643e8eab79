#!/bin/bash
# Compares the CPU two HTTP servers spend per request, both loaded at the same time so that
# the host's drift hits them alike (README "Core performance", fourth round).
#   bench/side-by-side.sh BINARY_A BINARY_B [ROUNDS]
# Each binary is started as `BINARY --http-address 127.0.0.1:PORT ...` (a workspace-agent, or a
# wrapper taking the same arguments); each round loads both with `wrk -t1 -c32 -d3s` on
# /healthz at once and prints each one's CPU per request (/proc/PID/stat ticks) and B/A.
set -eu
A=$1; B=$2; ROUNDS=${3:-3}
PORT_A=${PORT_A:-18101}; PORT_B=${PORT_B:-18102}
STATE=$(mktemp -d)
trap 'kill $PA $PB 2>/dev/null; wait 2>/dev/null; rm -rf "$STATE"' EXIT
start() {
    "$1" --http-address "127.0.0.1:$2" --state-dir "$STATE/$2" --log-level warning --prometheus-address "" \
        --socket-server-enabled false >/dev/null 2>&1 &
    echo $!
}
ticks() { awk '{print $14+$15}' "/proc/$1/stat"; }
PA=$(start "$A" "$PORT_A"); PB=$(start "$B" "$PORT_B")
for _ in $(seq 100); do
    curl -s -o /dev/null "127.0.0.1:$PORT_A/healthz" && curl -s -o /dev/null "127.0.0.1:$PORT_B/healthz" && break
    sleep 0.05
done
wrk -t1 -c32 -d1s "http://127.0.0.1:$PORT_A/healthz" >/dev/null & wrk -t1 -c32 -d1s "http://127.0.0.1:$PORT_B/healthz" >/dev/null; wait
for _ in $(seq "$ROUNDS"); do
    TA0=$(ticks $PA); TB0=$(ticks $PB)
    wrk -t1 -c32 -d3s "http://127.0.0.1:$PORT_A/healthz" > "$STATE/a.txt" &
    wrk -t1 -c32 -d3s "http://127.0.0.1:$PORT_B/healthz" > "$STATE/b.txt"; wait
    TA1=$(ticks $PA); TB1=$(ticks $PB)
    QA=$(awk '/requests in/ {print $1}' "$STATE/a.txt"); QB=$(awk '/requests in/ {print $1}' "$STATE/b.txt")
    awk -v ta=$((TA1 - TA0)) -v tb=$((TB1 - TB0)) -v qa="$QA" -v qb="$QB" -v hz="$(getconf CLK_TCK)" 'BEGIN {
        a = ta * 1e6 / hz / qa; b = tb * 1e6 / hz / qb
        printf "A %.2f us/req (%d)   B %.2f us/req (%d)   B/A %.3f\n", a, qa, b, qb, b / a }'
done
