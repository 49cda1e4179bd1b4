#!/usr/bin/env bash
# Start (or replace) an instance's daemon container: `kael-thread-rebuild serve`, restarted unless
# stopped, hardened, as the Claude user, every mount at the same path inside as outside.
#
#   image/run-daemon.sh --config CFG [--user UID:GID] [--name NAME] [--image IMAGE] [--print]
#
# --user defaults to the owner of the config's project dir; --name to
# kael-thread-rebuild-<instance>. --print shows the `docker run` command instead of running it.
# The container's environment names the config (kael-mounts prints the variable), so every command works as
# `docker exec -i NAME kael-thread-rebuild COMMAND`.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=lib.sh source-path=SCRIPTDIR
. "$here/lib.sh"

config="" user="" name="" image="$KAEL_IMAGE_DEFAULT" print=0
while [ $# -gt 0 ]; do
  case "$1" in
    --config) config="$2"; shift ;;
    --user) user="$2"; shift ;;
    --name) name="$2"; shift ;;
    --image) image="$2"; shift ;;
    --print) print=1 ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    *) echo "run-daemon: unknown argument: $1" >&2; exit 2 ;;
  esac
  shift
done
config="$(kael_config_path run-daemon "$config")" || exit 2

if [ -z "$user" ]; then
  project_dir=$(sed -n 's/^[[:space:]]*project_dir[[:space:]]*=[[:space:]]*["'\'']\(.*\)["'\''][[:space:]]*$/\1/p' "$config" | head -n1)
  [ -d "$project_dir" ] || { echo "run-daemon: pass --user UID:GID (no project dir found to take it from)" >&2; exit 2; }
  user="$(stat -c %u:%g "$project_dir")"
fi

KAEL_ARGS=()
kael_read_config "$image" "$config" "${user%%:*}" "${user##*:}" daemon
name="${name:-kael-thread-rebuild-$KAEL_INSTANCE}"
kael_hardening "$user"
kael_labels daemon "$KAEL_INSTANCE"
# --init: a real PID 1 that forwards signals and reaps the tmux clients' children.
cmd=(docker run -d --name "$name" --restart unless-stopped --init --stop-timeout 30
  "${KAEL_ARGS[@]}" "$image" serve)

if [ "$print" -eq 1 ]; then
  printf '%q ' "${cmd[@]}"; echo
  exit 0
fi
if docker container inspect "$name" >/dev/null 2>&1; then
  echo "run-daemon: replacing the existing container $name"
  docker stop -t 30 "$name" >/dev/null
  docker rm "$name" >/dev/null
fi
id=$("${cmd[@]}")
echo "run-daemon: $name started (${id:0:12}) as $user, instance $KAEL_INSTANCE, state $KAEL_STATE_DIR"
