#!/usr/bin/env bash
# Make a Debian bookworm base image WITHOUT any container registry: debootstrap a minbase root
# filesystem, prune what a container never needs, and `docker import` it.
#
#   image/make-base.sh [--force] [--name NAME:TAG] [--include PKG,PKG,...]
#                      [--variant runtime|builder|minbase]
#
# Defaults: --name kael-base:bookworm --variant runtime (= minbase + the appliance's runtime:
# python3, python3-venv, tmux, ca-certificates). `--variant builder` is runtime + a C compiler
# and the Python headers (the image's builder stage compiles the scanner with them; they never
# reach the runtime image). `--variant minbase` adds nothing. `--include`
# appends packages (e.g. systemd,dbus for a stand-in household). Skips when NAME:TAG exists;
# --force rebuilds. Environment: DEBIAN_MIRROR (default http://deb.debian.org/debian),
# KAEL_BASE_CACHE (where the root filesystem is assembled; default .tools/base-rootfs).
set -euo pipefail
cd "$(dirname "$0")/.."

name="kael-base:bookworm"
variant="runtime"
extra=""
force=0
while [ $# -gt 0 ]; do
  case "$1" in
    --force) force=1 ;;
    --name) name="$2"; shift ;;
    --include) extra="$2"; shift ;;
    --variant) variant="$2"; shift ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "make-base: unknown argument: $1" >&2; exit 2 ;;
  esac
  shift
done

case "$variant" in
  runtime) include="python3,python3-venv,tmux,ca-certificates" ;;
  builder) include="python3,python3-venv,tmux,ca-certificates,gcc,libc6-dev,python3-dev" ;;
  minbase) include="" ;;
  *) echo "make-base: --variant must be runtime, builder or minbase" >&2; exit 2 ;;
esac
if [ -n "$extra" ]; then include="${include:+$include,}$extra"; fi

if [ "$force" -eq 0 ] && docker image inspect "$name" >/dev/null 2>&1; then
  echo "make-base: $name exists (use --force to rebuild)"
  exit 0
fi
command -v debootstrap >/dev/null 2>&1 || {
  echo "make-base: debootstrap is missing (apt-get install -y debootstrap)" >&2; exit 1; }

mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
work="${KAEL_BASE_CACHE:-.tools/base-rootfs}/${name//[:\/]/_}"
rootfs="$work/rootfs"
started=$(date +%s)
rm -rf "$rootfs"
mkdir -p "$work"

echo "make-base: debootstrap minbase bookworm${include:+ + $include} -> $rootfs"
debootstrap --variant=minbase ${include:+--include="$include"} \
  bookworm "$rootfs" "$mirror" >"$work/debootstrap.log" 2>&1 || {
  tail -n 30 "$work/debootstrap.log" >&2
  echo "make-base: debootstrap failed (full log: $work/debootstrap.log)" >&2
  exit 1
}

# Later `apt-get install` in derived images keeps docs and man pages out too.
cat >"$rootfs/etc/dpkg/dpkg.cfg.d/90-kael-nodoc" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
path-exclude /usr/share/lintian/*
EOF
cat >"$rootfs/etc/apt/apt.conf.d/90-kael-container" <<'EOF'
APT::Install-Recommends "false";
APT::Install-Suggests "false";
Acquire::Languages "none";
EOF
# What a container never needs: package caches and lists, docs, man pages, locales, logs.
rm -rf "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/cache/apt/archives/*.deb \
  "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/log/* "$rootfs"/var/cache/debconf/*-old \
  "$rootfs"/usr/share/info/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/lintian/*
find "$rootfs/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete
find "$rootfs/usr/share/doc" -mindepth 1 -type d -empty -delete
find "$rootfs/usr/share/locale" -mindepth 1 -maxdepth 1 -not -name locale.alias -exec rm -rf {} +
# Emptied lists must look stale, or apt's cache_valid_time thinks the cache is fresh.
touch -d @0 "$rootfs/var/lib/apt/lists"
# debootstrap copies the host's resolv.conf and hostname; Docker provides its own.
: >"$rootfs/etc/resolv.conf"
: >"$rootfs/etc/hostname"

tar --numeric-owner -C "$rootfs" -c . | docker import \
  --change 'ENV LANG=C.UTF-8' \
  --change 'CMD ["/bin/bash"]' \
  --message "debootstrap --variant=minbase bookworm${include:+ --include=$include}" \
  - "$name" >/dev/null
rm -rf "$rootfs"

size=$(docker image inspect -f '{{.Size}}' "$name")
echo "make-base: $name built in $(( $(date +%s) - started )) s, $(( size / 1000000 )) MB"
