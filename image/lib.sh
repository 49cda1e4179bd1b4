# shellcheck shell=bash
# shellcheck disable=SC2034  # the KAEL_* variables are read by the scripts that source this
# Shared by image/run-daemon.sh and image/mcp-command.sh: the hardening every appliance container
# gets and the mounts an instance's config asks for. Source it; it defines functions only.

KAEL_IMAGE_DEFAULT="kael-thread-rebuild:latest"
KAEL_LABEL_PREFIX="io.kael-thread-rebuild"
# The memory limit of every appliance container (docker's --memory; no swap beyond it). Measured
# (README, Benchmarks): a 1,000,000-message session or a single 500 MB line stays below 2 GiB.
# The installer passes the same value (kael_appliance_memory).
KAEL_MEMORY="${KAEL_MEMORY:-2g}"

# kael_hardening UID:GID -> KAEL_ARGS (appended): the flags of appliance.md "Identity and
# hardening". Nothing in the engine needs a network, a capability or a writable root; its
# memory is bounded, so the container is too ($KAEL_MEMORY).
kael_hardening() {
  KAEL_ARGS+=(--user "$1" --read-only --cap-drop ALL --security-opt no-new-privileges
    --network none --tmpfs "/tmp:rw,nosuid,nodev,mode=1777" --pids-limit 256
    --memory "$KAEL_MEMORY" --memory-swap "$KAEL_MEMORY")
}

# kael_home UID -> the uid's home on the host (so `~` in the config means the same inside).
kael_home() {
  getent passwd "$1" | cut -d: -f6 || true
}

# kael_read_config IMAGE CONFIG UID GID [ROLE] -> KAEL_INSTANCE, KAEL_ACTIVATION, KAEL_STATE_DIR,
# KAEL_HOME and
# KAEL_ARGS (appended: -e and -v flags). The image reads the config (`kael-mounts`), so the host
# needs no Python; every path is mounted at the same path inside as outside. ROLE (daemon, mcp,
# doctor; default daemon): doctor's one-off container also mounts ~/.claude.json, which a
# long-running container must not (Claude Code replaces it by rename; see image/mounts.py).
kael_read_config() {
  local image="$1" config="$2" uid="$3" gid="$4" role="${5:-daemon}" kind path mode facts
  KAEL_HOME="$(kael_home "$uid")"
  [ -n "$KAEL_HOME" ] || KAEL_HOME=/nonexistent
  facts="$(docker run --rm --network none --read-only --cap-drop ALL \
    --security-opt no-new-privileges --no-healthcheck --user "$uid:$gid" -e HOME="$KAEL_HOME" \
    -v "$config:$config:ro" "$image" kael-mounts --config "$config" --uid "$uid" --for "$role")" || {
    echo "kael: the image could not read the config $config (see above)" >&2
    return 2
  }
  KAEL_ARGS+=(-e "HOME=$KAEL_HOME")  # the config's variable comes as an `env` line
  while IFS=$'\t' read -r kind path mode; do
    case "$kind" in
      instance) KAEL_INSTANCE="$path" ;;
      activation) KAEL_ACTIVATION="$path" ;;
      state)
        KAEL_STATE_DIR="$path"
        if [ ! -d "$path" ]; then  # the engine wants it 0700 and owned by the Claude user
          mkdir -p "$(dirname "$path")" && mkdir -m 0700 "$path"
          if [ "$(id -u)" -eq 0 ]; then chown "$uid:$gid" "$path"; fi
        fi ;;
      env) KAEL_ARGS+=(-e "$path") ;;
      mount)
        if [ ! -e "$path" ]; then
          echo "kael: $path (from $config) does not exist on this host" >&2
          return 2
        fi
        KAEL_ARGS+=(-v "$path:$path:$mode") ;;
      optional)
        if [ -e "$path" ]; then KAEL_ARGS+=(-v "$path:$path:$mode"); fi ;;
      *) echo "kael: unexpected line from kael-mounts: $kind" >&2; return 2 ;;
    esac
  done <<<"$facts"
}

# kael_labels ROLE INSTANCE -> KAEL_ARGS (appended): how doctor and the installer find containers.
kael_labels() {
  KAEL_ARGS+=(--label "$KAEL_LABEL_PREFIX.role=$1" --label "$KAEL_LABEL_PREFIX.instance=$2")
}

# kael_config_path PROG PATH -> PATH made absolute on stdout (the containers mount it at the
# same path); a missing --config or file is a usage error of PROG: exit 2.
kael_config_path() {
  local prog="$1" config="$2"
  [ -n "$config" ] || { echo "$prog: --config is required" >&2; exit 2; }
  [ -f "$config" ] || { echo "$prog: config $config not found" >&2; exit 2; }
  printf '%s/%s\n' "$(cd "$(dirname "$config")" && pwd)" "$(basename "$config")"
}

# kael_sudoers_name INSTANCE -> the file name of the instance's rule in /etc/sudoers.d (sudo skips
# names holding a dot).
kael_sudoers_name() {
  printf 'kael-thread-rebuild-%s\n' "${1//./_}"
}

# kael_sudoers_rule UID WRAPPER INSTANCE ROLE... -> the sudoers rule on stdout: the Claude user
# (by uid) may run, as root and without a password, exactly `WRAPPER ROLE INSTANCE` for each ROLE
# (mcp and hook; a pointer instance's runner also wait and start-failed), no other argument
# matching; no pseudo-terminal in between, so stdio goes straight through (docs/security.md).
kael_sudoers_rule() {
  local uid="$1" wrapper="$2" instance="$3" role lines=""
  shift 3
  for role in "$@"; do lines="${lines:+$lines, }$wrapper $role $instance"; done
  printf '%s\n' "# kael-thread-rebuild, instance $instance: $*, nothing else" \
    "Defaults!$wrapper !use_pty" \
    "#$uid ALL=(root) NOPASSWD: $lines"
}
