#!/usr/bin/env bash
# GraphiQL smoke test in a real browser (manual; not part of `cargo test` or CI).
#
# Builds and starts the server on the example world, opens /graphql in headless Chromium with
# every request outside the server blocked (the page and its assets come from the binary),
# enters a team token in the request-headers editor, loads the schema documentation, runs a
# query and checks the result pane, then runs a subscription, edits a manifest of the world (a
# copy) and checks that the event shows. Screenshot: target/graphiql/graphiql.png. Exits non-zero on
# any failure.
#
# Installs what it needs: Debian `chromium` (apt-get, when /usr/bin/chromium is missing) and
# playwright-core (npm) into target/graphiql/node.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
OUT="$ROOT/target/graphiql"
NODE_DIR="$OUT/node"
CHROMIUM="${CHROMIUM:-/usr/bin/chromium}"
mkdir -p "$OUT" "$NODE_DIR"

say() { printf '[graphiql] %s\n' "$*" >&2; }
t0=$(date +%s)
elapsed() { echo "$(( $(date +%s) - t0 ))s"; }

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

# --- browser ---------------------------------------------------------------------------------
if [ ! -x "$CHROMIUM" ]; then
  say "installing Debian chromium (apt-get)"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi
command -v node >/dev/null || { say "node is required (apt-get install nodejs npm)"; exit 1; }
command -v npm >/dev/null || { say "npm is required (apt-get install npm)"; exit 1; }

# --- server ----------------------------------------------------------------------------------
say "building control-plane ($(elapsed))"
cargo build -q -p control-plane
BIN="$TARGET_DIR/debug/control-plane"

PORT="$(node -e 'const s=require("net").createServer();s.listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')"
DATA_DIR="$(mktemp -d)"
WORLD_DIR="$DATA_DIR/world"
cp -r examples/world "$WORLD_DIR"
SERVER_PID=""
cleanup() {
  if [ -n "$SERVER_PID" ] && kill -0 "$SERVER_PID" 2>/dev/null; then
    kill "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
  fi
  rm -rf "$DATA_DIR"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

BASE="http://127.0.0.1:$PORT"
say "starting server on $BASE ($(elapsed); log: target/graphiql/server.log)"
"$BIN" serve --manifests "$WORLD_DIR" --data-dir "$DATA_DIR/data" --listen "127.0.0.1:$PORT" \
  --auth mock --now 2026-09-01T00:00:00Z >"$OUT/server.log" 2>&1 &
SERVER_PID=$!

ready=""
for _ in $(seq 1 300); do
  kill -0 "$SERVER_PID" 2>/dev/null || { say "server exited early:"; tail -20 "$OUT/server.log" >&2; exit 1; }
  if curl -sf "$BASE/readyz" 2>/dev/null | grep -q '"ready":true'; then ready=1; break; fi
  sleep 0.1
done
[ -n "$ready" ] || { say "server not ready after 30 s"; tail -20 "$OUT/server.log" >&2; exit 1; }
say "server ready ($(elapsed))"

# --- npm: the browser driver only ---------------------------------------------------------------
WANT="playwright-core@1"
if [ "$(cat "$NODE_DIR/.installed" 2>/dev/null)" != "$WANT" ] || [ ! -d "$NODE_DIR/node_modules" ]; then
  say "npm install $WANT"
  [ -f "$NODE_DIR/package.json" ] || echo '{"private":true}' >"$NODE_DIR/package.json"
  (cd "$NODE_DIR" && npm install --no-audit --no-fund --loglevel=error $WANT >&2)
  echo "$WANT" >"$NODE_DIR/.installed"
fi
say "packages ready ($(elapsed))"

# --- browser test ----------------------------------------------------------------------------
BASE_URL="$BASE" CHROMIUM="$CHROMIUM" OUT_DIR="$OUT" WORLD_DIR="$WORLD_DIR" \
  NODE_PATH="$NODE_DIR/node_modules" node "$ROOT/tests/graphiql/graphiql.js"
say "passed ($(elapsed)); screenshot: target/graphiql/graphiql.png"
