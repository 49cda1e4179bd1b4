#!/usr/bin/env bash
# Run doctor for an instance in a one-off container: the daemon's mounts and hardening, plus the
# host's pid namespace (--pid host, read-only use) so that doctor can read the live Claude Code's
# command line (the "deaf process" check) and check its session registry entry, plus
# ~/.claude.json when Claude Code keeps it there (a long-running container must not mount it:
# see image/mounts.py). The daemon itself never shares the host's pid namespace.
#
#   image/run-doctor.sh --config CFG [--user UID:GID] [--image IMAGE] [--wrapper PATH]
#                       [-- DOCTOR ARGS (e.g. --json)]
#
# Before that it asks the host what no container can see, and hands it to doctor as JSON in
# $KAEL_HOST_FACTS: from the Docker engine the instance's MCP server containers (orphaned ones),
# its daemon container (image, state, the engine version inside it) and IMAGE, the installed
# image; and the Claude user's access (run as root: its groups, `docker version` tried as that
# user, and whether sudo lets it run WRAPPER mcp|hook|wait|start-failed INSTANCE, default
# /usr/local/lib/kael-thread-rebuild/kael-run). Exit status: doctor's (0 when every check passes).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=lib.sh source-path=SCRIPTDIR
. "$here/lib.sh"

config="" user="" image="$KAEL_IMAGE_DEFAULT" wrapper=/usr/local/lib/kael-thread-rebuild/kael-run
while [ $# -gt 0 ]; do
  case "$1" in
    --config) config="$2"; shift ;;
    --user) user="$2"; shift ;;
    --image) image="$2"; shift ;;
    --wrapper) wrapper="$2"; shift ;;
    --) shift; break ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "run-doctor: unknown argument: $1" >&2; exit 2 ;;
  esac
  shift
done
config="$(kael_config_path run-doctor "$config")" || exit 2
user="${user:-$(id -u):$(id -g)}"

# json_string TEXT -> TEXT as a JSON string (control characters dropped).
json_string() {
  local text="$1"
  text="${text//\\/\\\\}"
  text="${text//\"/\\\"}"
  printf '"%s"' "$(printf '%s' "$text" | tr -d '\000-\037')"
}

# host_facts INSTANCE IMAGE -> the JSON of kael_thread_rebuild.doctor.host_facts.HostFacts on
# stdout. Every object comes from Docker's own `{{json}}` templates; nothing is parsed here.
host_facts() {
  local instance="$1" image="$2" by installed daemons="" mcps id fields labels image_id state engine
  by="label=$KAEL_LABEL_PREFIX.instance=$instance"
  if installed=$(docker image inspect --format '{"id":{{json .Id}},"labels":{{json .Config.Labels}},' \
      "$image" 2>/dev/null); then
    installed="$installed\"ref\":$(json_string "$image")}"
  else
    installed=null
  fi
  for id in $(docker ps -aq --no-trunc --filter "label=$KAEL_LABEL_PREFIX.role=daemon" --filter "$by"); do
    fields=$(docker container inspect --format \
      '{"id":{{json .Id}},"name":{{json .Name}},"state":{{json .State.Status}},"image_id":{{json .Image}},' \
      "$id" 2>/dev/null) || continue  # removed meanwhile
    state=$(docker container inspect --format '{{.Image}} {{.State.Status}}' "$id" 2>/dev/null) \
      || continue
    image_id="${state%% *}" state="${state##* }"
    labels=$(docker image inspect --format '{{json .Config.Labels}}' "$image_id" 2>/dev/null || echo null)
    engine=""
    if [ "$state" = running ]; then
      engine=$(timeout 30 docker exec "$id" kael-thread-rebuild --version 2>/dev/null || true)
    fi
    daemons="$daemons${daemons:+,}$fields\"image_labels\":$labels,\"engine\":$(json_string "$engine")}"
  done
  mcps=$(docker ps -a --filter "label=$KAEL_LABEL_PREFIX.role=mcp" --filter "$by" --format \
    '{"id":{{json .ID}},"name":{{json .Names}},"state":{{json .State}},"status":{{json .Status}}}' \
    | paste -sd, -)
  printf '{"collected_by":"run-doctor.sh","installed_image":%s,"daemons":[%s],"mcp_containers":[%s],"claude_access":%s}' \
    "$installed" "$daemons" "$mcps" "$(claude_access "${user%%:*}" "${user##*:}" "$instance")"
}

# claude_access UID GID INSTANCE -> the JSON of kael_thread_rebuild.doctor.host_facts.ClaudeAccess:
# the Claude user's groups, whether it can use the Docker socket (`docker version` tried as that
# user, with nothing of this environment), and which of the wrapper's lines of INSTANCE sudo
# allows it (`sudo -l -U`, which runs nothing): mcp and hook, and the pointer runner's wait and
# start-failed (doctor asks for those of a pointer instance). Only root can try them for another
# user.
claude_access() {
  local uid="$1" gid="$2" instance="$3" name="" groups="" reach=null detail allowed="" line
  local socket="${DOCKER_HOST:-unix:///var/run/docker.sock}"
  name="$(getent passwd "$uid" | cut -d: -f1 || true)"
  if [ -n "$name" ]; then
    groups="$(for line in $(id -Gn "$name" 2>/dev/null); do json_string "$line"; echo; done | paste -sd, -)"
  fi
  if [ "$uid" -eq "$(id -u)" ]; then
    reach=true detail="this doctor was started through Docker by that very user"
  elif [ "$(id -u)" -ne 0 ] || [ -z "$name" ]; then
    detail="only root can try it for uid $uid"
  elif detail="$(setpriv --reuid="$uid" --regid="$gid" --init-groups env -i PATH="$PATH" \
      timeout 10 docker -H "$socket" version --format '{{.Server.Version}}' 2>&1)"; then
    reach=true detail="docker version answered: $detail"
  else
    reach=false detail="$(printf '%s\n' "$detail" | sed -n '/./{p;q;}')"
  fi
  for line in mcp hook wait start-failed; do
    if [ "$(id -u)" -eq 0 ] && [ -n "$name" ] \
        && sudo -n -l -U "$name" "$wrapper" "$line" "$instance" >/dev/null 2>&1; then
      allowed="$allowed${allowed:+,}$(json_string "$line $instance")"
    fi
  done
  printf '{"user":%s,"uid":%s,"groups":[%s],"socket":%s,"socket_reachable":%s,"socket_detail":%s,"wrapper":%s,"allowed":[%s]}' \
    "$(json_string "$name")" "$uid" "$groups" "$(json_string "$socket")" "$reach" \
    "$(json_string "$detail")" "$(json_string "$wrapper")" "$allowed"
}

KAEL_ARGS=()
kael_read_config "$image" "$config" "${user%%:*}" "${user##*:}" doctor
kael_hardening "$user"
kael_labels doctor "$KAEL_INSTANCE"
facts="$(host_facts "$KAEL_INSTANCE" "$image")"
exec docker run --rm --pid host --no-healthcheck "${KAEL_ARGS[@]}" -e "KAEL_HOST_FACTS=$facts" \
  "$image" kael-thread-rebuild --config "$config" doctor "$@"
