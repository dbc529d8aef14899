#!/usr/bin/env bash
# Starts PostGraphile 4.14 (this folder's package-lock.json) over the database load-world.sh filled,
# in the foreground. See benches/postgres/README.md, section "PostGraphile peer".
#
#   benches/postgres/postgraphile/serve.sh shipped|tuned [PORT]     # PORT default 5433 / 5434
#
#   shipped  database `controlplane`: the reference schema exactly as loaded (no extra index, no
#            row-level security), connected as the loading user `postgres`; no authentication, the
#            query names its team.
#   tuned    database `controlplane_tuned`: + fk-indexes.sql + rls.sql; connected as
#            cp_authenticator, every request runs as cp_viewer (not superuser, no BYPASSRLS) with the
#            claims of its JWT (HS256, secret $JWT_SECRET, audience `postgraphile`) as
#            `jwt.claims.*`, so the policies see `jwt.claims.team`; `node jwt.js TEAM` makes a token.
#
# Options: the "For Production" set of the PostGraphile v4 CLI docs (usage-cli), minus
# --subscriptions (no subscriptions are served here), plus --disable-default-mutations (the read
# model never writes) and the connection-filter plugin (the shipped Q3 needs an OR filter).
# Environment: PG_PORT (55532), JWT_SECRET (default: a fixed benchmark-only string), CLUSTER_WORKERS
# (unset: one Node process, as measured by bench.sh; N: --cluster-workers N, "experimental" in v4).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
MODE="${1:-}"
PG_PORT="${PG_PORT:-55532}"
die() { printf 'serve.sh: %s\n' "$*" >&2; exit 1; }

command -v node >/dev/null || die "node missing (apt-get install nodejs npm)"
[[ -x "$HERE/node_modules/.bin/postgraphile" ]] || die "postgraphile not installed: run 'npm ci' in $HERE"
command -v pg_isready >/dev/null || die "pg_isready missing (PostgreSQL client)"
pg_isready -q -h 127.0.0.1 -p "$PG_PORT" || die "no PostgreSQL on 127.0.0.1:$PG_PORT (run load-world.sh first)"

COMMON=(
    --host 127.0.0.1
    --schema public
    --retry-on-init-fail
    --dynamic-json
    --no-setof-functions-contain-nulls
    --no-ignore-rbac
    --extended-errors errcode
    --append-plugins @graphile-contrib/pg-simplify-inflector,postgraphile-plugin-connection-filter
    --disable-graphiql
    --enable-query-batching
    --disable-query-log
    --legacy-relations omit
    --disable-default-mutations
)
case "$MODE" in
    shipped)
        ARGS=(--port "${2:-5433}" --connection "postgres://postgres@127.0.0.1:$PG_PORT/controlplane") ;;
    tuned)
        ARGS=(--port "${2:-5434}" --connection "postgres://cp_authenticator@127.0.0.1:$PG_PORT/controlplane_tuned"
              --default-role cp_viewer --jwt-secret "${JWT_SECRET:-cp-postgraphile-peer-benchmark-only}") ;;
    *) die "usage: serve.sh shipped|tuned [PORT]" ;;
esac
[[ -n "${CLUSTER_WORKERS:-}" ]] && COMMON+=(--cluster-workers "$CLUSTER_WORKERS")
cd "$HERE"
NODE_ENV=production exec "$HERE/node_modules/.bin/postgraphile" "${ARGS[@]}" "${COMMON[@]}"
