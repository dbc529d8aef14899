#!/usr/bin/env bash
# Loads a genworld world into a throwaway PostgreSQL cluster for the PostGraphile peer and leaves
# the cluster running. See benches/postgres/README.md, section "PostGraphile peer".
#
#   benches/postgres/postgraphile/load-world.sh [SIZE|WORLD_DIR]   # default 100k; starts + loads
#   benches/postgres/postgraphile/load-world.sh stop               # stops the cluster
#
# The load is the existing loader's (baseline.py: schema.sql, then load_world() with WORKERS
# connections per kind, then VACUUM ANALYZE); no P2/P4/P5 runs and no result file is written.
# Two databases come out of it:
#   controlplane        the reference schema exactly as loaded (PostGraphile mode `shipped`)
#   controlplane_tuned  a copy (CREATE DATABASE ... TEMPLATE) + fk-indexes.sql + rls.sql (mode `tuned`)
# Environment: PEER_DIR (default /tmp/pg-peer: data/, run/, venv/, postgres.log), PG_PORT (55532),
# WORKERS (10).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PGDIR="$(cd "$HERE/.." && pwd)"
ROOT="$(cd "$HERE/../../.." && pwd)"
PEER_DIR="${PEER_DIR:-/tmp/pg-peer}"
PG_PORT="${PG_PORT:-55532}"
WORKERS="${WORKERS:-10}"
PGDATA="$PEER_DIR/data"
SOCKDIR="$PEER_DIR/run"
PGLOG="$PEER_DIR/postgres.log"
VENV="$PEER_DIR/venv"

log() { printf '[load-world %s] %s\n' "$(date -u +%H:%M:%S)" "$*"; }
die() { printf 'load-world: %s\n' "$*" >&2; exit 1; }

PG_BIN="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)"
[[ -n "$PG_BIN" && -x "$PG_BIN/postgres" ]] || die "PostgreSQL server binaries not found under /usr/lib/postgresql/*/bin (apt-get install postgresql)"
RUNAS=()
if [[ $(id -u) -eq 0 ]]; then
    id postgres >/dev/null 2>&1 || die "user 'postgres' missing (initdb refuses to run as root)"
    RUNAS=(runuser -u postgres --)
fi
PSQL=("$PG_BIN/psql" -h 127.0.0.1 -p "$PG_PORT" -U postgres -q -v ON_ERROR_STOP=1)

if [[ "${1:-}" == stop ]]; then
    "${RUNAS[@]}" "$PG_BIN/pg_ctl" -D "$PGDATA" -m fast -w stop
    exit 0
fi

ARG="${1:-100k}"
if [[ -d "$ARG" ]]; then WORLD="$(cd "$ARG" && pwd)"; else WORLD="$ROOT/target/genworld/$ARG"; fi
[[ -f "$WORLD/manifest.json" ]] || die "no world at $WORLD (generate it: benches/postgres/README.md, table 'Worlds')"
command -v python3 >/dev/null || die "python3 missing"
if "${RUNAS[@]}" "$PG_BIN/pg_ctl" -D "$PGDATA" status >/dev/null 2>&1; then
    die "a cluster is already running on $PGDATA (stop it: $0 stop)"
fi

if ! "$VENV/bin/python" -c 'import psycopg' >/dev/null 2>&1; then
    log "creating $VENV with psycopg[binary]==3.2.10 (the pin of run.sh)"
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q 'psycopg[binary]==3.2.10'
fi

log "initdb $PGDATA (settings as run.sh: initdb defaults, listener on 127.0.0.1:$PG_PORT)"
rm -rf "$PGDATA" "$SOCKDIR"
mkdir -p "$PEER_DIR" "$SOCKDIR"
: > "$PGLOG"
[[ $(id -u) -eq 0 ]] && chown postgres: "$PEER_DIR" "$SOCKDIR" "$PGLOG"
"${RUNAS[@]}" "$PG_BIN/initdb" -D "$PGDATA" -U postgres --auth=trust --encoding=UTF8 --locale=C.UTF-8 >/dev/null
cat >> "$PGDATA/postgresql.conf" <<EOF

# --- benches/postgres/postgraphile/load-world.sh ---
listen_addresses = '127.0.0.1'
port = $PG_PORT
unix_socket_directories = '$SOCKDIR'
EOF
"${RUNAS[@]}" "$PG_BIN/pg_ctl" -D "$PGDATA" -l "$PGLOG" -w start >/dev/null
"${PSQL[@]}" -d postgres -c 'CREATE DATABASE controlplane'
DSN="host=127.0.0.1 port=$PG_PORT user=postgres dbname=controlplane"

log "loading $WORLD with baseline.py's loader ($WORKERS workers per kind)"
"$VENV/bin/python" - "$DSN" "$WORLD" "$PGDIR" "$WORKERS" <<'PY'
import json, os, sys
dsn, world, pgdir, workers = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
sys.path.insert(0, pgdir)
import baseline  # noqa: E402  (the reference loader of benches/postgres)
files = {v['kind']: f for f, v in json.load(open(os.path.join(world, 'manifest.json')))['files'].items()}
conn = baseline.connect(dsn)
conn.execute(open(os.path.join(pgdir, 'schema.sql')).read())
p1 = baseline.load_world(conn, world, files, 'reference', workers, dsn)
print('loaded %d reference-kind documents in %.1f s (%.0f objects/s)' % (
    p1['documents_processed_reference_kinds'], p1['seconds_reference_kinds'], p1['objects_per_s']))
conn.execute('VACUUM ANALYZE')
PY

log "controlplane_tuned = copy + fk-indexes.sql + rls.sql"
"${PSQL[@]}" -d postgres -c 'CREATE DATABASE controlplane_tuned TEMPLATE controlplane'
"${PSQL[@]}" -d controlplane_tuned -f "$PGDIR/fk-indexes.sql"
"${PSQL[@]}" -d controlplane_tuned -f "$HERE/rls.sql"
"${PSQL[@]}" -d controlplane_tuned -c 'VACUUM ANALYZE'
log "ready: postgres://postgres@127.0.0.1:$PG_PORT/controlplane (shipped), .../controlplane_tuned (tuned); stop with: $0 stop"
