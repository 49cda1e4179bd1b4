#!/usr/bin/env bash
# Print the command Claude Code runs for the advisor's MCP server: `docker run -i --rm ...`,
# one argument per line (so no quoting is lost). Its project is the working directory.
#
#   image/advisor/mcp-command.sh [--project DIR] [--sessions DIR] [--kimi-home DIR]
#                                [--user UID:GID] [--image IMAGE] [--network NET]
#   cd PROJECT && mapfile -t mcp < <(image/advisor/mcp-command.sh)
#   claude mcp add -s local advisor-mcp -- "${mcp[@]}"
# (the line names the project, so register it for the project only; advisor-mcp is the name
# the permissions of `kael-advisor pieces` expect)
#
#   image/advisor/mcp-command.sh --no-project --user UID:GID --sessions DIR --kimi-home DIR
#                                [--image IMAGE] [--network NET]
# prints the fixed part the installer writes to NAME.advisor.argv for the wrapper
# (`sudo -n kael-run advisor NAME`), which adds the caller's project itself: no project mounts,
# no -w, the image last. Nothing is created then: the installer made the directories as the user.
#
# Defaults: the project is $PWD; the hook's directory $KAEL_ADVISOR_SESSIONS, else
# ${CLAUDE_CONFIG_DIR:-~/.claude}/kael-advisor-sessions; the Kimi home $KIMI_CODE_HOME, else
# ~/.kimi-code; the caller's uid:gid; kael-advisor:latest; Docker's default network
# (--network host for a provider on the host's loopback).
#
# Mounts, each at its own path (a Kimi session belongs to its directory, a window file names
# its cwd): the project read-only, its .agent/ read-write (the binding table and the
# consultations), the hook's directory read-only, the Kimi home read-write. Nothing else. Every
# source must exist, or Docker would create it as root: .agent/ and the Kimi home are made here
# as the caller. Hardened like the appliance's containers except the network, which the advisor
# needs for its provider: read-only root, a small /tmp, no capabilities, no new privileges,
# pids, memory and CPU limits. --init reaps the Kimi CLI's processes and forwards SIGTERM.
set -euo pipefail

project="$PWD"
sessions="${KAEL_ADVISOR_SESSIONS:-${CLAUDE_CONFIG_DIR:-$HOME/.claude}/kael-advisor-sessions}"
kimi_home="${KIMI_CODE_HOME:-$HOME/.kimi-code}"
user=""
image="kael-advisor:latest"
network=""
with_project=1
while [ $# -gt 0 ]; do
  case "$1" in
    --project) project="$2"; shift ;;
    --sessions) sessions="$2"; shift ;;
    --kimi-home) kimi_home="$2"; shift ;;
    --user) user="$2"; shift ;;
    --image) image="$2"; shift ;;
    --network) network="$2"; shift ;;
    --no-project) with_project="" ;;
    -h|--help) sed -n '2,/^[^#]/{/^#/p}' "$0"; exit 0 ;;
    *) echo "mcp-command: unknown argument: $1" >&2; exit 2 ;;
  esac
  shift
done
fail() { echo "mcp-command: $*" >&2; exit 2; }
# The installer runs this as root for another user: --user is then never left to the default.
[ -n "$user" ] || [ -n "$with_project" ] || fail "--no-project needs --user UID:GID"
user="${user:-$(id -u):$(id -g)}"
if [ -n "$with_project" ]; then
  [ -d "$project" ] || fail "$project is not a directory"
  mkdir -p "$project/.agent" "$kimi_home"
  # shellcheck disable=SC2174  # only the sessions dir itself must be 0700, not its parents
  mkdir -p -m 700 "$sessions"
  project="$(cd "$project" && pwd -P)"
fi
for dir in "$sessions" "$kimi_home"; do
  [ -d "$dir" ] || fail "$dir is not a directory"
done
sessions="$(cd "$sessions" && pwd -P)"
kimi_home="$(cd "$kimi_home" && pwd -P)"
# --mount, not -v: -v creates a missing source as root, and kael-run refuses it. A comma would
# end the mount's field, a newline the argv file's line.
bind() {
  case "$1" in *,*|*"
"*) fail "a mount source may hold no comma or newline: $1" ;; esac
  printf '%s\n' --mount "type=bind,source=$1,target=$1${2:+,$2}"
}

printf '%s\n' docker run -i --rm --init --log-driver none --user "$user" \
  --read-only --tmpfs /tmp:rw,nosuid,nodev,mode=1777 --cap-drop ALL \
  --security-opt no-new-privileges --pids-limit 256 \
  --memory "${KAEL_ADVISOR_MEMORY:-1g}" --memory-swap "${KAEL_ADVISOR_MEMORY:-1g}" \
  --cpus "${KAEL_ADVISOR_CPUS:-1}" ${network:+--network "$network"} \
  --label io.kael-thread-rebuild.role=advisor-mcp
if [ -n "$with_project" ]; then
  bind "$project" readonly
  bind "$project/.agent"
  printf '%s\n' -w "$project"
fi
bind "$sessions" readonly
printf '%s\n' -e "KAEL_ADVISOR_SESSIONS=$sessions"
bind "$kimi_home"
printf '%s\n' -e "KIMI_CODE_HOME=$kimi_home" "$image"
