#!/usr/bin/env bash
# Run doctor for an instance in a one-off container: the daemon's mounts and hardening, plus the
# host's pid namespace (--pid host, read-only use) so that doctor can read the live Claude Code's
# command line (the "deaf process" check) and check its session registry entry. The daemon itself
# never shares the host's pid namespace.
#
#   image/run-doctor.sh --config CFG [--user UID:GID] [--image IMAGE] [-- DOCTOR ARGS (e.g. --json)]
#
# Exit status: doctor's (0 when every check passes).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=lib.sh source-path=SCRIPTDIR
. "$here/lib.sh"

config="" user="" image="$KAEL_IMAGE_DEFAULT"
while [ $# -gt 0 ]; do
  case "$1" in
    --config) config="$2"; shift ;;
    --user) user="$2"; shift ;;
    --image) image="$2"; shift ;;
    --) shift; break ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) echo "run-doctor: unknown argument: $1" >&2; exit 2 ;;
  esac
  shift
done
[ -n "$config" ] || { echo "run-doctor: --config is required" >&2; exit 2; }
[ -f "$config" ] || { echo "run-doctor: config $config not found" >&2; exit 2; }
config="$(cd "$(dirname "$config")" && pwd)/$(basename "$config")"
user="${user:-$(id -u):$(id -g)}"

KAEL_ARGS=()
kael_read_config "$image" "$config" "${user%%:*}" "${user##*:}"
kael_hardening "$user"
kael_labels doctor "$KAEL_INSTANCE"
exec docker run --rm --pid host --no-healthcheck "${KAEL_ARGS[@]}" "$image" \
  kael-thread-rebuild --config "$config" doctor "$@"
