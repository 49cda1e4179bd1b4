#!/usr/bin/env bash
# Reference runner for activation = "pointer" (see docs/pointer-runner.md).
#
#   pointer_runner.sh POINTER_FILE [CLAUDE_ARG...] < prompts
#
# Reads one prompt per line of stdin and, for each, runs in the current directory
#   claude -p --resume "<session id in POINTER_FILE>" CLAUDE_ARG... -- PROMPT
# then hands the Stop hook input of that call to `kael-thread-rebuild hook-stop` and runs
# `kael-thread-rebuild wait`, which returns once no rebuild is scheduled or running; the next
# call resumes whatever session the pointer names by then. Claude's replies go to stdout.
#
# When POINTER_FILE does not exist yet, the first call starts a new session (--session-id) and
# the pointer is created (mode 0600) once that call succeeded.
#
# A call that fails before Claude Code ran (no Stop: the program is missing, say) is reported
# with `kael-thread-rebuild start-failed`: when it was the first call on the session a rebuild
# switched to, the engine switches the pointer back to the old session, and the prompt is run
# again on it, so it is not lost.
#
# Environment:
#   CLAUDE_BIN         the Claude Code binary (default: claude)
#   KAEL_CMD           the kael-thread-rebuild command, split on blanks
#                      (default: kael-thread-rebuild; e.g. "docker exec -i NAME kael-thread-rebuild")
#   KAEL_WAIT_TIMEOUT  seconds `wait` may take (default: 600)
#   KAEL_RUN           for a Claude user without Docker access: the root-owned wrapper through
#                      sudo, split on blanks (e.g. "sudo -n /usr/local/lib/kael-thread-rebuild/kael-run");
#                      with KAEL_INSTANCE it replaces KAEL_CMD: `KAEL_RUN hook INSTANCE`,
#                      `KAEL_RUN wait INSTANCE` (the wait's timeout is the installer's) and
#                      `KAEL_RUN start-failed INSTANCE` (session and exit status on stdin)
#   KAEL_INSTANCE      the instance name for KAEL_RUN
set -uo pipefail

if [ $# -lt 1 ]; then
  echo "usage: pointer_runner.sh POINTER_FILE [CLAUDE_ARG...] < prompts" >&2
  exit 2
fi
pointer=$1
shift
claude_bin=${CLAUDE_BIN:-claude}
read -r -a kael <<< "${KAEL_CMD:-kael-thread-rebuild}"
read -r -a run <<< "${KAEL_RUN:-}"
instance=${KAEL_INSTANCE:-}
wait_timeout=${KAEL_WAIT_TIMEOUT:-600}
if [ ${#run[@]} -gt 0 ] && [ -z "$instance" ]; then
  echo "pointer_runner: KAEL_RUN needs KAEL_INSTANCE" >&2
  exit 2
fi
uuid_re='^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$'

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export KAEL_RUNNER_STOP_FILE="$work/stop.json"
# Claude Code runs this extra Stop hook itself, so the input forwarded below is exactly its own
# (the variable is expanded by the hook's shell, not here).
# shellcheck disable=SC2016
stop_settings='{"hooks":{"Stop":[{"hooks":[{"type":"command","command":"cat > \"$KAEL_RUNNER_STOP_FILE\""}]}]}}'

log() { echo "pointer_runner: $*" >&2; }

# The engine's hook-stop and wait: directly (KAEL_CMD), or through the wrapper (KAEL_RUN).
hook_stop() {
  if [ ${#run[@]} -gt 0 ]; then "${run[@]}" hook "$instance"; else "${kael[@]}" hook-stop; fi
}
engine_wait() {
  if [ ${#run[@]} -gt 0 ]; then
    "${run[@]}" wait "$instance"
  else
    "${kael[@]}" wait --timeout "$wait_timeout"
  fi
}
# SESSION did not start (exit STATUS): through the wrapper both go on stdin, one a line, since
# sudo allows it no argument of the caller's.
engine_start_failed() {
  if [ ${#run[@]} -gt 0 ]; then
    printf '%s\n%s\n' "$1" "$2" | "${run[@]}" start-failed "$instance"
  else
    "${kael[@]}" start-failed --session "$1" --reason "claude exited with status $2" < /dev/null
  fi
}

create_pointer() {
  local tmp
  tmp=$(mktemp "$pointer.XXXXXX") || return 1
  if chmod 600 "$tmp" && printf '%s\n' "$1" > "$tmp" && sync "$tmp" && mv -f "$tmp" "$pointer"
  then
    return 0
  fi
  rm -f "$tmp"
  return 1
}

# The session id the pointer names, in $id (exit 1 when it holds anything else).
read_pointer() {
  id=""
  read -r id < "$pointer" || true
  if ! [[ $id =~ $uuid_re ]]; then
    log "$pointer does not hold a session id"
    exit 1
  fi
}

# One call: claude on $id (or a new session), its Stop handed on; the status in $status.
call() {
  local session
  if [ "$1" = new ]; then session=(--session-id "$id"); else session=(--resume "$id"); fi
  rm -f "$KAEL_RUNNER_STOP_FILE"
  "$claude_bin" -p "${session[@]}" --settings "$stop_settings" "${claude_args[@]}" \
    -- "$prompt" < /dev/null
  status=$?
  if [ "$status" -ne 0 ]; then
    log "claude exited with status $status"
  elif [ "$1" = new ] && ! create_pointer "$id"; then
    log "cannot create $pointer"
    exit 1
  fi
}

settle() {
  engine_wait < /dev/null >&2 || log "wait failed"
}

claude_args=("$@")
while IFS= read -r prompt; do
  [ -n "$prompt" ] || continue
  if [ -e "$pointer" ]; then
    read_pointer
    call resume
  else
    id=$(cat /proc/sys/kernel/random/uuid)
    call new
  fi

  # A call that failed before Claude Code ran (no Stop) on a session a rebuild just switched
  # to: the engine switches back to the old session while the new one never ran, and the
  # prompt goes to the session the pointer names then.
  if [ "$status" -ne 0 ] && [ ! -s "$KAEL_RUNNER_STOP_FILE" ] && [ -e "$pointer" ]; then
    failed=$id
    engine_start_failed "$failed" "$status" >&2 || log "start-failed failed"
    settle
    read_pointer
    if [ "$id" != "$failed" ]; then
      log "session $failed did not start; the prompt goes to session $id"
      call resume
    fi
  fi

  if [ -s "$KAEL_RUNNER_STOP_FILE" ]; then
    hook_stop < "$KAEL_RUNNER_STOP_FILE" >&2 || log "hook-stop failed"
    settle
  fi
done
