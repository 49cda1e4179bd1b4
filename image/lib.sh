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
# The CPU limit of every appliance container (docker's --cpus): one core at most each, so that
# an instance's containers (the daemon and up to four MCP servers, image/kael-run) cannot take
# every core of a small host. The installer passes the same value (kael_appliance_cpus).
KAEL_CPUS="${KAEL_CPUS:-1.0}"

# kael_limits -> KAEL_ARGS (appended): the memory (no swap beyond it) and CPU limits.
kael_limits() {
  KAEL_ARGS+=(--memory "$KAEL_MEMORY" --memory-swap "$KAEL_MEMORY" --cpus "$KAEL_CPUS")
}

# kael_hardening UID:GID -> KAEL_ARGS (appended): the flags of appliance.md "Identity and
# hardening". Nothing in the engine needs a network, a capability or a writable root; its
# memory is bounded, so the container is too ($KAEL_MEMORY, $KAEL_CPUS).
kael_hardening() {
  KAEL_ARGS+=(--user "$1" --read-only --cap-drop ALL --security-opt no-new-privileges
    --network none --tmpfs "/tmp:rw,nosuid,nodev,mode=1777" --pids-limit 256)
  kael_limits
}

# kael_home UID -> the uid's home on the host (so `~` in the config means the same inside).
kael_home() {
  getent passwd "$1" | cut -d: -f6 || true
}

# kael_mountable PATH OWNER UID [WHERE] -> status 0 when PATH may be bind-mounted for the Claude
# user UID, else one line on stderr (ending in WHERE) and status 2. PATH must exist, be its own
# real path (neither it nor a directory above it is a symlink: root's dockerd would follow the
# user's link anywhere) and belong to OWNER (kael-mounts says which: `user` UID, `root` 0,
# `root-or-user` either). docker's --mount takes no comma or quote in a path unescaped.
kael_mountable() {
  local path="$1" owner="$2" uid="$3" where="${4:+ $4}" real have
  real="$(realpath -e -- "$path" 2>/dev/null)" || {
    echo "kael: $path does not exist on this host$where" >&2
    return 2
  }
  if [ "$real" != "$path" ]; then
    echo "kael: $path is not its real path ($real): a symlink in a mount is refused$where" >&2
    return 2
  fi
  case "$path" in
    *,*|*\"*) echo "kael: $path holds a comma or a quote, which a mount cannot take$where" >&2
      return 2 ;;
  esac
  have="$(stat -c %u -- "$path")"
  case "$owner:$have" in
    user:"$uid"|root:0|root-or-user:0|root-or-user:"$uid") return 0 ;;
    user:*) owner="the Claude user (uid $uid)" ;;
    root:*) owner="root" ;;
    *) owner="root or the Claude user (uid $uid)" ;;
  esac
  echo "kael: $path belongs to uid $have, not to $owner: refused as a mount$where" >&2
  return 2
}

# kael_bind PATH rw|ro -> KAEL_ARGS (appended): PATH bind-mounted at the same path. --mount,
# unlike -v, never creates a missing source (dockerd would, as root, through the user's links).
kael_bind() {
  local spec="type=bind,source=$1,target=$1"
  [ "$2" = ro ] && spec="$spec,readonly"
  KAEL_ARGS+=(--mount "$spec")
}

# kael_root_only DIR -> status 0 when DIR and every directory above it are root's, none a
# symlink, and no one else may write them or they are sticky (/tmp: others may not rename what is
# root's there): nothing in that path can change under root.
kael_root_only() {
  local dir="$1"
  while :; do
    case "$(stat -c '%u %A' -- "$dir" 2>/dev/null)" in
      "0 d"????-??-?|"0 d"????????t) ;;
      *) return 1 ;;
    esac
    [ "$dir" = / ] && return 0
    dir="$(dirname -- "$dir")"
  done
}

# kael_make_state_dir PATH UID GID: a missing state dir made 0700 and the Claude user's: by root
# in a directory only root can change (the installer's /var/lib/kael-thread-rebuild), else as
# that user, so that root never follows a symlink of the user's.
kael_make_state_dir() {
  local path="$1" uid="$2" gid="$3" parent as=()
  [ -d "$path" ] && return 0
  parent="$(dirname -- "$path")"
  if [ "$(id -u)" -eq 0 ] && [ "$uid" -ne 0 ]; then
    if kael_root_only "$parent"; then
      mkdir -m 0700 -- "$path" && chown "$uid:$gid" -- "$path" && return 0
    fi
    as=(setpriv --reuid="$uid" --regid="$gid" --clear-groups)
  fi
  # shellcheck disable=SC2015  # either mkdir failing is the one error below
  ${as[@]+"${as[@]}"} mkdir -p -- "$parent" && ${as[@]+"${as[@]}"} mkdir -m 0700 -- "$path" || {
    echo "kael: cannot make the state dir $path as uid $uid; make it (mode 0700, that uid's)" >&2
    return 2
  }
}

# kael_config_facts IMAGE CONFIG UID GID [ROLE] -> KAEL_HOME and KAEL_FACTS, the lines of
# `kael-mounts` for ROLE (daemon, mcp, doctor; default daemon). The image reads the config as
# the engine does, so the host needs no Python; the config must pass kael_mountable.
kael_config_facts() {
  local image="$1" config="$2" uid="$3" gid="$4" role="${5:-daemon}"
  KAEL_HOME="$(kael_home "$uid")"
  [ -n "$KAEL_HOME" ] || KAEL_HOME=/nonexistent
  kael_mountable "$config" root-or-user "$uid" "(the config)" || return 2
  # shellcheck disable=SC2030  # a scratch KAEL_ARGS for this one-off container only
  KAEL_FACTS="$(KAEL_ARGS=(); kael_bind "$config" ro; kael_limits
    docker run --rm --network none --read-only --cap-drop ALL \
      --security-opt no-new-privileges --no-healthcheck --user "$uid:$gid" -e HOME="$KAEL_HOME" \
      "${KAEL_ARGS[@]}" "$image" kael-mounts --config "$config" --uid "$uid" --for "$role")" || {
    echo "kael: the image could not read the config $config (see above)" >&2
    return 2
  }
}

# kael_read_config IMAGE CONFIG UID GID [ROLE] -> KAEL_INSTANCE, KAEL_ACTIVATION, KAEL_STATE_DIR,
# KAEL_HOME and KAEL_ARGS (appended: -e and --mount flags) from kael_config_facts. Every path is
# mounted at the same path inside as outside, once kael_mountable passed it. ROLE: doctor's
# one-off container also mounts ~/.claude.json, which a long-running container must not (Claude
# Code replaces it by rename; see image/mounts.py).
kael_read_config() {
  local config="$2" uid="$3" gid="$4" kind path mode owner
  kael_config_facts "$@" || return 2
  # shellcheck disable=SC2031  # the caller's KAEL_ARGS, not kael_config_facts' scratch one
  KAEL_ARGS+=(-e "HOME=$KAEL_HOME")  # the config's variable comes as an `env` line
  while IFS=$'\t' read -r kind path mode owner; do
    case "$kind" in
      instance) KAEL_INSTANCE="$path" ;;
      activation) KAEL_ACTIVATION="$path" ;;
      state)
        KAEL_STATE_DIR="$path"
        kael_make_state_dir "$path" "$uid" "$gid" || return 2 ;;
      env) KAEL_ARGS+=(-e "$path") ;;
      mount)
        kael_mountable "$path" "$owner" "$uid" "(from $config)" || return 2
        kael_bind "$path" "$mode" ;;
      optional)  # a symlink counts as there (and is refused), even to nothing
        if [ -e "$path" ] || [ -L "$path" ]; then
          kael_mountable "$path" "$owner" "$uid" "(from $config)" || return 2
          kael_bind "$path" "$mode"
        fi ;;
      *) echo "kael: unexpected line from kael-mounts: $kind" >&2; return 2 ;;
    esac
  done <<<"$KAEL_FACTS"
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
