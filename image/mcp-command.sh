#!/usr/bin/env bash
# Print the command Claude Code runs for the MCP server: `docker run -i --rm ...` with the same
# hardening and mounts as the daemon, one argument per line (so no quoting is lost).
#
#   image/mcp-command.sh --config CFG [--user UID:GID] [--image IMAGE]
#   mapfile -t mcp < <(image/mcp-command.sh --config CFG)
#   claude mcp add --scope user kael-thread-rebuild -- "${mcp[@]}"
#
# --init makes a real PID 1 that forwards the SIGTERM Claude Code sends to `docker run` (a Python
# PID 1 would ignore it); on EOF of stdin the server exits by itself and --rm removes the
# container. The labels let doctor find containers left behind.
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
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    *) echo "mcp-command: unknown argument: $1" >&2; exit 2 ;;
  esac
  shift
done
config="$(kael_config_path mcp-command "$config")" || exit 2
user="${user:-$(id -u):$(id -g)}"

KAEL_ARGS=()
kael_read_config "$image" "$config" "${user%%:*}" "${user##*:}" mcp
kael_hardening "$user"
kael_labels mcp "$KAEL_INSTANCE"
printf '%s\n' docker run -i --rm --init --no-healthcheck --log-driver none "${KAEL_ARGS[@]}" \
  "$image" kael-thread-rebuild-mcp --config "$config"
