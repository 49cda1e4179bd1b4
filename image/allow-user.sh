#!/usr/bin/env bash
# Let a non-root Claude user start its instance's MCP server and deliver its Stop hook without
# any Docker access (run as root; the installer does the same in roles/kael_claude):
#
#   image/allow-user.sh --config CFG --user NAME [--image IMAGE] [--name CONTAINER]
#                       [--wrapper PATH] [--wait-timeout SECONDS]
#   image/allow-user.sh --remove --config CFG [--wrapper PATH]
#
# Writes, root-owned: RUN_DIR/<instance>.mcp.argv (the lines of mcp-command.sh) and
# RUN_DIR/<instance>.hook.argv (`docker exec -i CONTAINER kael-thread-rebuild --config CFG
# hook-stop`), RUN_DIR being the one compiled into the wrapper (image/kael-run), and
# /etc/sudoers.d/kael-thread-rebuild-<instance> (checked with visudo) allowing NAME exactly
# `WRAPPER mcp <instance>` and `WRAPPER hook <instance>`; for a pointer instance (activation
# 'pointer') also its runner's `WRAPPER wait <instance>` and `WRAPPER start-failed <instance>`
# (RUN_DIR/<instance>.wait.argv and .start-failed.argv, as the installer writes them). Then
# prints what to register in Claude Code: the MCP command (one argument per line) and the hook
# command. --wrapper: where kael-run is installed (default
# /usr/local/lib/kael-thread-rebuild/kael-run); --wait-timeout: how long the runner's wait may
# take (default 600, the installer's kael_pointer_wait_timeout).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=lib.sh source-path=SCRIPTDIR
. "$here/lib.sh"

config="" user="" name="" image="$KAEL_IMAGE_DEFAULT" remove=0 wait_timeout=600
wrapper=/usr/local/lib/kael-thread-rebuild/kael-run
while [ $# -gt 0 ]; do
  case "$1" in
    --config) config="$2"; shift ;;
    --user) user="$2"; shift ;;
    --name) name="$2"; shift ;;
    --image) image="$2"; shift ;;
    --wrapper) wrapper="$2"; shift ;;
    --wait-timeout) wait_timeout="$2"; shift ;;
    --remove) remove=1 ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "allow-user: unknown argument: $1" >&2; exit 2 ;;
  esac
  shift
done
[ "$(id -u)" -eq 0 ] || { echo "allow-user: run as root" >&2; exit 2; }
printf '%s' "$wait_timeout" | grep -Eqx '[1-9][0-9]{0,5}' \
  || { echo "allow-user: --wait-timeout wants whole seconds, not $wait_timeout" >&2; exit 2; }
config="$(kael_config_path allow-user "$config")" || exit 2
[ -x "$wrapper" ] || { echo "allow-user: no wrapper at $wrapper (install image/kael-run)" >&2; exit 2; }
run_dir="$(sed -n 's/^RUN_DIR=//p' "$wrapper")"
if [ "$remove" -eq 1 ]; then
  # Only the instance's name is needed: the config is read as its owner, nothing is mounted.
  kael_config_facts "$image" "$config" "$(stat -c %u "$config")" "$(stat -c %g "$config")" mcp
  instance="$(sed -n 's/^instance\t//p' <<<"$KAEL_FACTS")"
  [ -n "$instance" ] || { echo "allow-user: no instance name in $config" >&2; exit 2; }
  rm -f "/etc/sudoers.d/$(kael_sudoers_name "$instance")" \
    "$run_dir/$instance".{mcp,hook,wait,start-failed}.argv
  exit 0
fi
[ -n "$user" ] || { echo "allow-user: --user NAME is required" >&2; exit 2; }
uid="$(id -u "$user")" gid="$(id -g "$user")"
[ "$uid" -ne 0 ] || { echo "allow-user: root needs no rule (it runs docker itself)" >&2; exit 2; }
KAEL_ARGS=()
kael_read_config "$image" "$config" "$uid" "$gid" mcp
instance="$KAEL_INSTANCE"
sudoers="/etc/sudoers.d/$(kael_sudoers_name "$instance")"
install -d -o root -g root -m 0755 "$run_dir"
umask 022
# write_argv ROLE WORD... -> RUN_DIR/<instance>.ROLE.argv, one word a line, replaced by rename
write_argv() {
  local role="$1"
  shift
  printf '%s\n' "$@" >"$run_dir/.$instance.$role.argv.new"
  mv -f "$run_dir/.$instance.$role.argv.new" "$run_dir/$instance.$role.argv"
}
# mcp-command.sh prints the words one a line; a failure stops here (set -e), before any file.
mcp_words=$("$here/mcp-command.sh" --config "$config" --user "$uid:$gid" --image "$image")
mapfile -t mcp_argv <<<"$mcp_words"
write_argv mcp "${mcp_argv[@]}"
engine=(docker exec -i "${name:-kael-thread-rebuild-$instance}" kael-thread-rebuild --config "$config")
write_argv hook "${engine[@]}" hook-stop
roles=(mcp hook)
if [ "$KAEL_ACTIVATION" = pointer ]; then
  write_argv wait "${engine[@]}" wait --timeout "$wait_timeout"
  write_argv start-failed "${engine[@]}" start-failed
  roles+=(wait start-failed)
else
  rm -f "$run_dir/$instance".{wait,start-failed}.argv
fi

kael_sudoers_rule "$uid" "$wrapper" "$instance" "${roles[@]}" >"$sudoers.new"
chmod 0440 "$sudoers.new"
visudo -cqf "$sudoers.new" || { rm -f "$sudoers.new"; echo "allow-user: visudo refused the rule" >&2; exit 2; }
mv -f "$sudoers.new" "$sudoers"

printf '%s\n' sudo -n "$wrapper" mcp "$instance"
echo
printf '%q ' kael-hook --instance "$instance" --run "$wrapper" --config "$config" --state-dir \
  "$KAEL_STATE_DIR"
echo
