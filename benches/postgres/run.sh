#!/usr/bin/env bash
# PostgreSQL baseline of the benchmarks (not run in CI). See benches/postgres/README.md.
#
#   benches/postgres/run.sh [SIZE|WORLD_DIR] [ITERATIONS]
#
#   SIZE        10k (default) | 100k | 1m   -> world generated into target/genworld/<SIZE> if missing
#   WORLD_DIR   an existing genworld output directory (must contain manifest.json)
#   ITERATIONS  P2 iterations per query (default 1000)
#
# Environment: PG_PORT (first port tried, default 55432), TXMODE (reference|object, default reference),
# WORKERS (P1 concurrent connections per kind, default 1 = sequential; results get a -w<N> suffix),
# TEAM (group--team used by Q1/Q3/Q4; default: chosen like benches/support teams_by_load), WARMUP (default 50), FSYNC_TEST (1 = run pg_test_fsync first, default 1), TUNED (1 = also run P2 with FK indexes, default 1), KEEP_CLUSTER (1 = do not
# delete target/pg-baseline/data at the end; the server is stopped in any case), P5 (1 = time pg_dump -Fc and pg_restore after P2, default 1).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
cd "$ROOT"

ARG="${1:-10k}"
ITERATIONS="${2:-1000}"
TXMODE="${TXMODE:-reference}"
WORKERS="${WORKERS:-1}"
WARMUP="${WARMUP:-50}"
TUNED="${TUNED:-1}"
GENWORLD="$ROOT/tools/genworld/genworld.py"  # vendored copy (tools/genworld/README.md)
PSYCOPG_PIN='psycopg[binary]==3.2.10'

log() { printf '[run.sh %s] %s\n' "$(date -u +%H:%M:%S)" "$*"; }

# --- 1. PostgreSQL server binaries (Debian package) -----------------------------------------------
find_pg_bin() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1; }
PG_BIN="$(find_pg_bin || true)"
if [[ -z "$PG_BIN" || ! -x "$PG_BIN/postgres" ]]; then
    log "PostgreSQL server binaries missing: installing Debian's postgresql with apt-get"
    if [[ $(id -u) -ne 0 ]]; then echo "need root to apt-get install postgresql" >&2; exit 1; fi
    DEBIAN_FRONTEND=noninteractive apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql
    PG_BIN="$(find_pg_bin)"
fi
log "PostgreSQL binaries: $PG_BIN ($("$PG_BIN/postgres" --version))"

# initdb/pg_ctl refuse to run as root: run them as the 'postgres' user created by the package
RUNAS=()
if [[ $(id -u) -eq 0 ]]; then
    id postgres >/dev/null 2>&1 || { echo "user 'postgres' missing (install the postgresql package)" >&2; exit 1; }
    RUNAS=(runuser -u postgres --)
fi

# --- 2. Python venv with psycopg 3 ------------------------------------------------------------------
VENV="$ROOT/target/bench-tools/pg-venv"
if ! "$VENV/bin/python" -c 'import psycopg' >/dev/null 2>&1; then
    log "creating $VENV with $PSYCOPG_PIN"
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q "$PSYCOPG_PIN"
fi

# --- 3. World ------------------------------------------------------------------------------------------
if [[ -d "$ARG" ]]; then
    WORLD="$(cd "$ARG" && pwd)"
    SIZE="$(basename "$WORLD")"
    WORLD_CMD="(given directory)"
else
    SIZE="$ARG"
    case "$SIZE" in
        10k)  GEN_ARGS=(--teams 71 --apps-per-team 8 --exposures-per-app 3 --subscriptions-per-app 4) ;;  # 10,021 docs
        100k) GEN_ARGS=(--preset medium) ;;  # 705 x 8 x 3 x 4 = 99,784 docs
        1m)   GEN_ARGS=(--preset large) ;;   # 7050 x 8 x 3 x 4 = 996,358 docs
        *) echo "unknown size '$SIZE' (10k|100k|1m or a world directory)" >&2; exit 2 ;;
    esac
    WORLD="$ROOT/target/genworld/$SIZE"
    WORLD_CMD="python3 tools/genworld/genworld.py ${GEN_ARGS[*]} --out target/genworld/$SIZE"
    if [[ ! -f "$WORLD/manifest.json" ]]; then
        log "generating world: $WORLD_CMD"
        TMP="$ROOT/target/genworld/.tmp-$SIZE-$$"
        python3 "$GENWORLD" "${GEN_ARGS[@]}" --out "$TMP" >/dev/null
        mkdir -p "$ROOT/target/genworld"
        mv -T "$TMP" "$WORLD" 2>/dev/null || rm -rf "$TMP"  # another process may have won the race
    fi
fi
[[ -f "$WORLD/manifest.json" ]] || { echo "no manifest.json in $WORLD" >&2; exit 1; }
log "world: $WORLD ($(python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); print(m["totalDocuments"], "documents,", m["totalBytes"], "bytes")' "$WORLD/manifest.json"))"

# --- 4. Throwaway cluster ----------------------------------------------------------------------------
BASE="$ROOT/target/pg-baseline"
PGDATA="$BASE/data"
PGLOG="$BASE/postgres.log"
SOCKDIR="$BASE/run"
if [[ -f "$PGDATA/postmaster.pid" ]] && "${RUNAS[@]}" "$PG_BIN/pg_ctl" -D "$PGDATA" status >/dev/null 2>&1; then
    echo "a server is already running on $PGDATA (another run?); stop it first" >&2; exit 1
fi
rm -rf "$PGDATA" "$SOCKDIR"
mkdir -p "$BASE" "$SOCKDIR" "$ROOT/target/bench-results"
: > "$PGLOG"
if [[ $(id -u) -eq 0 ]]; then chown postgres: "$BASE" "$SOCKDIR" "$PGLOG"; fi

port_free() { python3 -c 'import socket,sys; s=socket.socket(); s.bind(("127.0.0.1", int(sys.argv[1])))' "$1" 2>/dev/null; }
PORT="${PG_PORT:-55432}"
for _ in $(seq 1 50); do port_free "$PORT" && break; PORT=$((PORT + 1)); done
port_free "$PORT" || { echo "no free port found" >&2; exit 1; }

STARTED=0
cleanup() {
    local rc=$?
    if [[ $STARTED -eq 1 ]]; then
        log "stopping the cluster"
        "${RUNAS[@]}" "$PG_BIN/pg_ctl" -D "$PGDATA" -m fast -w stop >/dev/null 2>&1 \
            || "${RUNAS[@]}" "$PG_BIN/pg_ctl" -D "$PGDATA" -m immediate -w stop >/dev/null 2>&1 || true
    fi
    if [[ "${KEEP_CLUSTER:-0}" != 1 ]]; then rm -rf "$PGDATA" "$SOCKDIR"; fi
    exit $rc
}
trap cleanup EXIT INT TERM

log "initdb $PGDATA"
"${RUNAS[@]}" "$PG_BIN/initdb" -D "$PGDATA" -U postgres --auth=trust --encoding=UTF8 --locale=C.UTF-8 >/dev/null
# Defaults for everything that matters (fsync=on, synchronous_commit=on, full_page_writes=on,
# shared_buffers=128MB, work_mem=4MB, max_wal_size=1GB); only the listener is changed.
cat >> "$PGDATA/postgresql.conf" <<EOF

# --- benches/postgres/run.sh ---
listen_addresses = '127.0.0.1'
port = $PORT
unix_socket_directories = '$SOCKDIR'
EOF
PG_SETTINGS="listen_addresses=127.0.0.1 port=$PORT unix_socket_directories=$SOCKDIR (everything else initdb defaults)"

log "starting PostgreSQL on 127.0.0.1:$PORT"
STARTED=1
"${RUNAS[@]}" "$PG_BIN/pg_ctl" -D "$PGDATA" -l "$PGLOG" -w start >/dev/null
"${RUNAS[@]}" "$PG_BIN/createdb" -h 127.0.0.1 -p "$PORT" -U postgres controlplane
DSN="host=127.0.0.1 port=$PORT user=postgres dbname=controlplane"

FSYNC_TXT="$ROOT/target/bench-results/pg_test_fsync-$SIZE.txt"
if [[ "${FSYNC_TEST:-1}" == 1 ]]; then
    log "pg_test_fsync -s 1 (disk flush latency on the data directory's file system) -> $FSYNC_TXT"
    "${RUNAS[@]}" "$PG_BIN/pg_test_fsync" -s 1 -f "$BASE/pg_test_fsync.tmp" > "$FSYNC_TXT" 2>&1 || true
    rm -f "$BASE/pg_test_fsync.tmp"
fi
log "load average: $(uptime)"
OUT="$ROOT/target/bench-results/postgres-$SIZE.json"
SUFFIX=""
[[ "$TXMODE" == reference ]] || SUFFIX="$SUFFIX-$TXMODE"
[[ "$WORKERS" == 1 ]] || SUFFIX="$SUFFIX-w$WORKERS"
OUT="$ROOT/target/bench-results/postgres-$SIZE$SUFFIX.json"
EXTRA=()
[[ "$TUNED" == 1 ]] && EXTRA+=(--fk-indexes "$HERE/fk-indexes.sql")
[[ -n "${TEAM:-}" ]] && EXTRA+=(--team "$TEAM")

"$VENV/bin/python" "$HERE/baseline.py" \
    --dsn "$DSN" --world "$WORLD" --size "$SIZE" --world-command "$WORLD_CMD" \
    --iterations "$ITERATIONS" --warmup "$WARMUP" --txmode "$TXMODE" --workers "$WORKERS" \
    --schema "$HERE/schema.sql" "${EXTRA[@]}" \
    --pgdata "$PGDATA" --pglog "$PGLOG" --pg-bin "$PG_BIN" --pg-ctl-prefix "${RUNAS[*]}" \
    --pg-settings "$PG_SETTINGS" --fsync-test "$FSYNC_TXT" --out "$OUT"
log "load average: $(uptime)"

# --- 5. P5: pg_dump / pg_restore of the loaded database (the counterpart of our snapshot) -----------
# The reference schema only: the tuned run's FK indexes are dropped first. Custom format (compressed,
# like our snapshot); the restore goes into a new database and rebuilds every index and constraint.
if [[ "${P5:-1}" == 1 ]]; then
    PSQL=("${RUNAS[@]}" "$PG_BIN/psql" -h 127.0.0.1 -p "$PORT" -U postgres -q -v ON_ERROR_STOP=1)
    "${PSQL[@]}" -d controlplane -c "DO \$\$ DECLARE r record; BEGIN FOR r IN SELECT indexname FROM pg_indexes WHERE indexname LIKE 'tuned\_%' LOOP EXECUTE 'DROP INDEX ' || quote_ident(r.indexname); END LOOP; END \$\$;"
    DUMP="$BASE/controlplane.dump"
    rm -f "$DUMP"
    now() { date +%s.%N; }
    log "P5: pg_dump -Fc"
    t0=$(now)
    "${RUNAS[@]}" "$PG_BIN/pg_dump" -h 127.0.0.1 -p "$PORT" -U postgres -Fc -f "$DUMP" controlplane
    t1=$(now)
    "${RUNAS[@]}" "$PG_BIN/createdb" -h 127.0.0.1 -p "$PORT" -U postgres controlplane_restore
    log "P5: pg_restore into a new database"
    t2=$(now)
    "${RUNAS[@]}" "$PG_BIN/pg_restore" -h 127.0.0.1 -p "$PORT" -U postgres -d controlplane_restore --exit-on-error "$DUMP"
    t3=$(now)
    DB_BYTES=$("${PSQL[@]}" -d controlplane -At -c "SELECT pg_database_size('controlplane')")
    P5_OUT="$ROOT/target/bench-results/postgres-$SIZE$SUFFIX-p5.json"
    python3 - "$P5_OUT" "$t0" "$t1" "$t2" "$t3" "$(stat -c %s "$DUMP")" "$DB_BYTES" "$(cat /proc/loadavg)" <<'PY'
import json, sys
out, t0, t1, t2, t3, dump, db, load = sys.argv[1:]
r = {"bench": "postgres-p5", "exportSeconds": float(t1) - float(t0), "restoreSeconds": float(t3) - float(t2),
     "dumpBytes": int(dump), "databaseBytes": int(db), "format": "pg_dump -Fc (custom, compressed)", "loadavgEnd": load}
json.dump(r, open(out, "w"), indent=2)
print(f"P5 pg_dump {r['exportSeconds']:.2f} s ({r['dumpBytes']} bytes of a {r['databaseBytes']}-byte database), pg_restore {r['restoreSeconds']:.2f} s -> {out}")
PY
    rm -f "$DUMP"
fi
