#!/usr/bin/env bash
# Refreshes the GraphiQL page's assets that the server embeds (control-plane/assets/graphiql/)
# from the npm registry: production builds of the pinned versions below, each tarball checked
# against the registry's sha512 integrity, with the packages' licence files. Run it after
# changing a version, review the diff, rebuild. Needs curl, tar, python3, sha512sum, base64.
set -euo pipefail

REACT=18.3.1
GRAPHIQL=4.1.2
REGISTRY="${NPM_REGISTRY:-https://registry.npmjs.org}"

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
OUT="$ROOT/control-plane/assets/graphiql"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$OUT"

# fetch NAME VERSION: downloads and unpacks the tarball into $WORK/NAME after checking it.
fetch() {
  local name=$1 version=$2
  local meta="$WORK/$name.json"
  curl -sfL "$REGISTRY/$name/$version" -o "$meta"
  local url integrity
  url=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["dist"]["tarball"])' "$meta")
  integrity=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["dist"]["integrity"])' "$meta")
  curl -sfL "$url" -o "$WORK/$name.tgz"
  local got="sha512-$(sha512sum "$WORK/$name.tgz" | cut -d' ' -f1 | xxd -r -p | base64 -w0)"
  [ "$got" = "$integrity" ] || { echo "integrity mismatch for $name@$version" >&2; exit 1; }
  mkdir -p "$WORK/$name"
  tar xzf "$WORK/$name.tgz" -C "$WORK/$name"
}

fetch react "$REACT"
fetch react-dom "$REACT"
fetch graphiql "$GRAPHIQL"

cp "$WORK/react/package/umd/react.production.min.js" "$OUT/react.production.min.js"
cp "$WORK/react-dom/package/umd/react-dom.production.min.js" "$OUT/react-dom.production.min.js"
cp "$WORK/graphiql/package/graphiql.min.js" "$OUT/graphiql.min.js"
cp "$WORK/graphiql/package/graphiql.min.css" "$OUT/graphiql.min.css"
cp "$WORK/react/package/LICENSE" "$OUT/LICENSE.react"
cp "$WORK/react-dom/package/LICENSE" "$OUT/LICENSE.react-dom"
cp "$WORK/graphiql/package/LICENSE" "$OUT/LICENSE.graphiql"
printf 'react %s\nreact-dom %s\ngraphiql %s\n' "$REACT" "$REACT" "$GRAPHIQL" > "$OUT/VERSIONS"
echo "assets of react $REACT and graphiql $GRAPHIQL written to $OUT" >&2
