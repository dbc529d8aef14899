#!/usr/bin/env bash
# Our server vs PostGraphile `shipped` vs PostGraphile `tuned`, one after another, with one load
# client (load.js). See benches/postgres/README.md, section "PostGraphile peer".
#
#   benches/postgres/postgraphile/load-world.sh 100k     # once: the cluster the peers serve
#   benches/postgres/postgraphile/bench.sh [TEAM]        # default payments--orders0
#
# 1. starts our release binary as is (never rebuilt) on the same world, waits for /readyz 200;
# 2. starts both PostGraphile modes and runs check.js (same records as ours?), stops them;
# 3. per server, alone (plus the idle PostgreSQL cluster): the Q1/Q3/Q4 mix, then Q1, Q3, Q4 alone,
#    16 keep-alive clients each, WARMUP s unrecorded + RUN_SECONDS s recorded.
# Results: $OUT/{check,answers-*,<server>-<queries>}.json and $OUT/results.md.
# Environment: RUN_SECONDS (15), WARMUP (3), CLIENTS (16), OUT (/tmp/pg-peer/results),
# WORLD (target/genworld/100k), OURS_DATA (/tmp/pg-peer-ours), PG_PORT (55532),
# QUIET_WAIT (600: at most this many seconds, before each run, waiting until no build/test process
# of other work (rustc, cargo, cargo-nextest, cc1, ld, target/*/deps/* test binaries) was seen for
# 10 s and the machine is < 10 % busy), TRIES (5: a run during which such a process ran is repeated;
# the table's last column shows the count seen in the kept run).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../../.." && pwd)"
TEAM="${1:-payments--orders0}"
RUN_SECONDS="${RUN_SECONDS:-15}"
WARMUP="${WARMUP:-3}"
CLIENTS="${CLIENTS:-16}"
OUT="${OUT:-/tmp/pg-peer/results}"
WORLD="${WORLD:-$ROOT/target/genworld/100k}"
OURS_BIN="$ROOT/target/release/control-plane"
OURS_DATA="${OURS_DATA:-/tmp/pg-peer-ours}"
PG_PORT="${PG_PORT:-55532}"
QUIET_WAIT="${QUIET_WAIT:-600}"
TRIES="${TRIES:-5}"
OURS_URL=http://127.0.0.1:18080/graphql/query
SHIPPED_URL=http://127.0.0.1:5433/graphql
TUNED_URL=http://127.0.0.1:5434/graphql

log() { printf '[bench %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
die() { printf 'bench.sh: %s\n' "$*" >&2; exit 1; }

for c in node curl pg_isready ps awk; do command -v "$c" >/dev/null || die "$c missing"; done
[[ -d "$HERE/node_modules/postgraphile" ]] || die "PostGraphile not installed: run 'npm ci' in $HERE"
[[ -x "$OURS_BIN" ]] || die "$OURS_BIN missing (this script never builds it: cargo build --release -p control-plane)"
[[ -f "$WORLD/manifest.json" ]] || die "no world at $WORLD"
pg_isready -q -h 127.0.0.1 -p "$PG_PORT" || die "no PostgreSQL on 127.0.0.1:$PG_PORT: run $HERE/load-world.sh first"
for p in 18080 5433 5434; do
    ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || die "port $p is in use (a server left running?)"
done
mkdir -p "$OUT"

PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null && wait "$p" 2>/dev/null; done; return 0; }
trap cleanup EXIT INT TERM
stop() {  # PID (one of ours): stop it and forget it
    kill "$1" && wait "$1" 2>/dev/null || true
    local keep=() p
    for p in "${PIDS[@]}"; do [[ "$p" == "$1" ]] || keep+=("$p"); done
    PIDS=("${keep[@]}")
}
wait_http() {  # URL [POST-BODY]: until HTTP 200, at most 600 s
    local i
    for i in $(seq 1 1200); do
        if [[ -n "${2:-}" ]]; then
            [[ "$(curl -s -o /dev/null -w '%{http_code}' -H 'content-type: application/json' -d "$2" "$1")" == 200 ]] && return 0
        else
            [[ "$(curl -s -o /dev/null -w '%{http_code}' "$1")" == 200 ]] && return 0
        fi
        sleep 0.5
    done
    die "$1 did not answer 200 in 600 s"
}
others() {  # build/test processes of other work (same rule as load.js otherWork)
    ps -eo comm=,args= | awk '$1 ~ /^(rustc|rustdoc|cargo|cargo-nextest|cc1|cc|ld|ld\.lld|collect2)$/ || $2 ~ /\/target\/[^\/ ]+\/deps\// { n++ } END { print n + 0 }'
}
busy_pct() {  # machine CPU busy % over 2 s
    local a b
    a=$(head -1 /proc/stat); sleep 2; b=$(head -1 /proc/stat)
    printf '%s\n%s\n' "$a" "$b" | awk '{ t = 0; for (i = 2; i <= NF; i++) t += $i; idle = $5 + $6
        if (NR == 1) { t0 = t; i0 = idle } else { printf "%d\n", 100 * ((t - t0) - (idle - i0)) / (t - t0) } }'
}
wait_quiet() {  # until 10 s without other build/test processes and the machine < 10 % busy, at most QUIET_WAIT s
    local start=$SECONDS quiet=0
    while (( SECONDS - start < QUIET_WAIT )); do
        if [[ "$(others)" == 0 ]]; then quiet=$((quiet + 1)); else quiet=0; fi
        if (( quiet >= 10 )) && (( $(busy_pct) < 10 )); then return 0; fi
        sleep 1
    done
    log "WARNING: the machine was not quiet within ${QUIET_WAIT}s; measuring anyway"
}
start_ours() {
    rm -rf "$OURS_DATA"
    "$OURS_BIN" serve --auth mock --listen 127.0.0.1:18080 --manifests "$WORLD" --data-dir "$OURS_DATA" \
        > "$OUT/ours.log" 2>&1 &
    OURS_PID=$!; PIDS+=("$OURS_PID")
    wait_http http://127.0.0.1:18080/readyz
}
start_peer() {  # MODE -> PEER_PID
    "$HERE/serve.sh" "$1" > "$OUT/postgraphile-$1.log" 2>&1 &
    PEER_PID=$!; PIDS+=("$PEER_PID")
    wait_http "$([[ $1 == shipped ]] && echo "$SHIPPED_URL" || echo "$TUNED_URL")" '{"query":"{__typename}"}'
}
measure() {  # SERVER URL; a run disturbed by other build/test processes is repeated (up to TRIES times)
    local qs try rc
    for qs in Q1,Q3,Q4 Q1 Q3 Q4; do
        for try in $(seq 1 "$TRIES"); do
            wait_quiet
            log "$1 $qs (try $try): load $(cut -d' ' -f1-3 /proc/loadavg)"
            rc=0
            node "$HERE/load.js" --server "$1" --url "$2" --team "$TEAM" --q4-name "$Q4_NAME" --queries "$qs" \
                --clients "$CLIENTS" --seconds "$RUN_SECONDS" --warmup "$WARMUP" --out "$OUT/$1-${qs//,/+}.json" \
                > "$OUT/row.tmp" || rc=$?
            [[ $rc == 0 || $rc == 3 ]] || die "load.js failed (exit $rc)"
            [[ $rc == 0 ]] && break
            log "$1 $qs: other build/test processes ran during the recorded window"
        done
        cat "$OUT/row.tmp" >> "$OUT/rows.md"
    done
    rm -f "$OUT/row.tmp"
}

{
    echo "# PostGraphile peer run $(date -u +%FT%TZ)"
    echo "nproc $(nproc), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), team $TEAM, world $WORLD,"
    echo "$CLIENTS clients, keep-alive, ${WARMUP}s warm-up + ${RUN_SECONDS}s recorded per row; latencies in ms"
    echo
} > "$OUT/results.md"
echo '| server | run | query | req/s | p50 | p99 | errors | other work seen |' > "$OUT/rows.md"
echo '|---|---|---|---|---|---|---|---|' >> "$OUT/rows.md"

log "starting our server ($OURS_BIN) on $WORLD"
start_ours
log "starting PostGraphile shipped + tuned for the answer check"
start_peer shipped; SHIPPED_PID=$PEER_PID
start_peer tuned; TUNED_PID=$PEER_PID
node "$HERE/check.js" --team "$TEAM" --world "$WORLD" --out "$OUT" \
    --ours "$OURS_URL" --shipped "$SHIPPED_URL" --tuned "$TUNED_URL" | tee "$OUT/check.txt"
Q4_NAME="$(node -e 'console.log(require(process.argv[1]).q4Application)' "$OUT/check.json")"
stop "$SHIPPED_PID"; stop "$TUNED_PID"

measure ours "$OURS_URL"; stop "$OURS_PID"
start_peer shipped; measure shipped "$SHIPPED_URL"; stop "$PEER_PID"
start_peer tuned; measure tuned "$TUNED_URL"; stop "$PEER_PID"

cat "$OUT/rows.md" >> "$OUT/results.md"
rm "$OUT/rows.md"
cat "$OUT/results.md"
log "done: $OUT"
