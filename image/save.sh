#!/usr/bin/env bash
# Write kael-thread-rebuild-<version>.tar.gz (`docker save | gzip`) for households without a
# registry; load it there with `gunzip -c FILE | docker load`.
#
#   image/save.sh [OUTPUT_DIR]     (default: dist/)
#
# Saves kael-thread-rebuild:<version> and :latest, or only $KAEL_APPLIANCE_IMAGE when set.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-dist}"
source="${KAEL_APPLIANCE_IMAGE:-kael-thread-rebuild:latest}"
version=$(docker image inspect -f '{{index .Config.Labels "org.opencontainers.image.version"}}' \
  "$source")
tags=("kael-thread-rebuild:$version" "kael-thread-rebuild:latest")
[ -z "${KAEL_APPLIANCE_IMAGE:-}" ] || tags=("$KAEL_APPLIANCE_IMAGE")
file="$out/kael-thread-rebuild-$version.tar.gz"
mkdir -p "$out"
started=$(date +%s)
docker save "${tags[@]}" | gzip -6 >"$file.tmp"
mv "$file.tmp" "$file"
echo "save: $file, $(( $(stat -c %s "$file") / 1000000 )) MB, in $(( $(date +%s) - started )) s"
