#!/usr/bin/env bash
# Write kael-thread-rebuild-<version>.tar.gz (`docker save | gzip`) for households without a
# registry; load it there with `gunzip -c FILE | docker load`.
#
#   image/save.sh [OUTPUT_DIR]     (default: dist/)
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-dist}"
version=$(docker image inspect -f '{{index .Config.Labels "org.opencontainers.image.version"}}' \
  kael-thread-rebuild:latest)
file="$out/kael-thread-rebuild-$version.tar.gz"
mkdir -p "$out"
started=$(date +%s)
docker save "kael-thread-rebuild:$version" "kael-thread-rebuild:latest" | gzip -6 >"$file.tmp"
mv "$file.tmp" "$file"
echo "save: $file, $(( $(stat -c %s "$file") / 1000000 )) MB, in $(( $(date +%s) - started )) s"
