#!/usr/bin/env bash
# The Molecule households, built locally (no registry), and the appliance image saved as the
# tarball a control machine delivers (image/save.sh). Run by every scenario's dependency step;
# one build at a time, and Docker's cache makes a second build take seconds.
#
#   molecule/images/build.sh [TAG...]     (no TAG: every household)
#
# Images: kael-molecule-household:bookworm (sudo, user alice),
# kael-molecule-household:bookworm-nosudo (no sudo, users alice and bob) and
# kael-molecule-household:bookworm-systemd (sudo, user alice, polkitd for the rule that lets a
# system unit's User= restart it; the systemd scenario). Claude Code is packed
# on this machine (`npm pack`, pinned in .ci/versions.env) and installed for each user in
# ~/.local during the build. The saved appliance: .tools/molecule/dist/.
#
# On a Docker engine shared by several checkouts: KAEL_APPLIANCE_IMAGE names this checkout's
# appliance (built as that name by image/build.sh, saved as it; the scenarios install it under
# that name), KAEL_MOLECULE_TAG replaces `bookworm` in the household tags (the scenarios read
# both).
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=/dev/null
. .ci/versions.env
started=$(date +%s)
wanted=("$@")
work=.tools/molecule
mkdir -p "$work/npm"
exec 9>"$work/build.lock"
flock 9

docker image inspect kael-base:bookworm >/dev/null 2>&1 || image/make-base.sh
appliance="${KAEL_APPLIANCE_IMAGE:-kael-thread-rebuild:latest}"
tag="${KAEL_MOLECULE_TAG:-bookworm}"
docker image inspect "$appliance" >/dev/null 2>&1 || image/build.sh

packed="$work/npm/$CLAUDE_CODE_VERSION"
if [ ! -f "$packed/.done" ]; then
  rm -rf "$packed" && mkdir -p "$packed"
  (cd "$packed" && npm pack --silent "@anthropic-ai/claude-code@$CLAUDE_CODE_VERSION" \
     "@anthropic-ai/claude-code-linux-x64@$CLAUDE_CODE_VERSION" >/dev/null)
  touch "$packed/.done"
fi

context="$work/household-context"
rm -rf "$context" && mkdir -p "$context/support" "$context/npm"
cp -a molecule/images/household/. "$context/"
cp tests/support/__init__.py tests/support/standin_api.py tests/support/claude_env.py \
  tests/support/fidelity.py tests/support/loopback.py tests/support/standin_openai.py \
  "$context/support/"
ln "$packed"/*.tgz "$context/npm/" 2>/dev/null || cp "$packed"/*.tgz "$context/npm/"

t=$(date +%s)
DOCKER_BUILDKIT=0 docker build -f image/systemd-household/Containerfile \
  -t "kael-molecule-systemd:$tag" image/systemd-household >"$work/build-systemd.log" 2>&1
echo "molecule images: kael-molecule-systemd:$tag ready in $(( $(date +%s) - t )) s"

build() {  # TAG SUDO USERS [PACKAGES]
  local log="$work/build-$1.log"
  case " ${wanted[*]} " in "  " | *" $1 "*) ;; *) return 0 ;; esac
  if ! DOCKER_BUILDKIT=0 docker build -f "$context/Containerfile" --build-arg SUDO="$2" \
      --build-arg USERS="$3" --build-arg BASE="kael-molecule-systemd:$tag" \
      --build-arg PACKAGES="${4:-}" \
      -t "kael-molecule-household:$1" "$context" >"$log" 2>&1; then
    tail -n 40 "$log" >&2
    echo "molecule images: building kael-molecule-household:$1 failed" >&2
    exit 1
  fi
  echo "molecule images: kael-molecule-household:$1 ready"
}
build "$tag" 1 "alice:1000"
build "$tag-nosudo" 0 "alice:1000 bob:1001"
build "$tag-systemd" 1 "alice:1000" polkitd

# Saved again only when an image changed (the archive's name carries the version); the
# advisor's in dist-advisor/ (the households' kael_advisor_image_archive).
advisor="${KAEL_ADVISOR_IMAGE:-kael-advisor:latest}"
image_id=$( (docker image inspect -f '{{.Id}}' "$appliance" "$advisor" 2>/dev/null || true) | sort | tr '\n' ' ')
if [ "$(cat "$work/dist/.image-id" 2>/dev/null)" != "$image_id" ]; then
  rm -rf "$work/dist" "$work/dist-advisor"
  KAEL_ADVISOR_OUT="$work/dist-advisor" image/save.sh "$work/dist"
  echo "$image_id" >"$work/dist/.image-id"
fi
echo "molecule images: done in $(( $(date +%s) - started )) s"
