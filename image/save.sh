#!/usr/bin/env bash
# Write kael-thread-rebuild-<version>.tar.gz (`docker save | gzip`) for households without a
# registry; load it there with `gunzip -c FILE | docker load`.
#
#   image/save.sh [OUTPUT_DIR]     (default: dist/)
#
# Saves kael-thread-rebuild:<version> and :latest, or only $KAEL_APPLIANCE_IMAGE when set; and
# beside it the advisor's kael-advisor-<version>.tar.gz (kael-advisor:<version> and :latest, or
# only $KAEL_ADVISOR_IMAGE) when that image is there (the kael_advisor role's
# kael_advisor_image_archive), in $KAEL_ADVISOR_OUT when set (none: KAEL_ADVISOR_OUT=-).
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

advisor="${KAEL_ADVISOR_IMAGE:-kael-advisor:latest}"
advisor_out="${KAEL_ADVISOR_OUT:-$out}"
if [ "$advisor_out" != - ] && docker image inspect "$advisor" >/dev/null 2>&1; then
  tags=("kael-advisor:$version" "kael-advisor:latest")
  [ -z "${KAEL_ADVISOR_IMAGE:-}" ] || tags=("$KAEL_ADVISOR_IMAGE")
  mkdir -p "$advisor_out"
  file="$advisor_out/kael-advisor-$version.tar.gz"
  started=$(date +%s)
  docker save "${tags[@]}" | gzip -6 >"$file.tmp"
  mv "$file.tmp" "$file"
  echo "save: $file, $(( $(stat -c %s "$file") / 1000000 )) MB, in $(( $(date +%s) - started )) s"
fi
