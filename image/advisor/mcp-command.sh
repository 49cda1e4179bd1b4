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
user="$(id -u):$(id -g)"
image="kael-advisor:latest"
network=""
while [ $# -gt 0 ]; do
  case "$1" in
    --project) project="$2"; shift ;;
    --sessions) sessions="$2"; shift ;;
    --kimi-home) kimi_home="$2"; shift ;;
    --user) user="$2"; shift ;;
    --image) image="$2"; shift ;;
    --network) network="$2"; shift ;;
    -h|--help) sed -n '2,/^[^#]/{/^#/p}' "$0"; exit 0 ;;
    *) echo "mcp-command: unknown argument: $1" >&2; exit 2 ;;
  esac
  shift
done
for dir in "$project"; do
  [ -d "$dir" ] || { echo "mcp-command: $dir is not a directory" >&2; exit 2; }
done
mkdir -p "$project/.agent" "$kimi_home"
mkdir -p -m 700 "$sessions"
project="$(cd "$project" && pwd -P)"
sessions="$(cd "$sessions" && pwd -P)"
kimi_home="$(cd "$kimi_home" && pwd -P)"

printf '%s\n' docker run -i --rm --init --log-driver none --user "$user" \
  --read-only --tmpfs /tmp:rw,nosuid,nodev,mode=1777 --cap-drop ALL \
  --security-opt no-new-privileges --pids-limit 256 \
  --memory "${KAEL_ADVISOR_MEMORY:-1g}" --memory-swap "${KAEL_ADVISOR_MEMORY:-1g}" \
  --cpus "${KAEL_ADVISOR_CPUS:-1}" ${network:+--network "$network"} \
  --label io.kael-thread-rebuild.role=advisor-mcp \
  -v "$project:$project:ro" -v "$project/.agent:$project/.agent" -w "$project" \
  -v "$sessions:$sessions:ro" -e "KAEL_ADVISOR_SESSIONS=$sessions" \
  -v "$kimi_home:$kimi_home" -e "KIMI_CODE_HOME=$kimi_home" \
  "$image"
