#!/usr/bin/env bash
# The one build command: wheels (on the host, pinned by constraints.txt), the local bases when no
# BASE is given and they are missing, then the image `kael-thread-rebuild:<version>` and `:latest`,
# and from it the advisor's `kael-advisor:<version>` and `:latest` (image/advisor/build.sh).
# Prints the image size and the time each step took.
#
#   image/build.sh                       # bases kael-base:bookworm and :bookworm-build (made
#                                        # locally when missing)
#   BASE=python:3.11-slim-bookworm@sha256:... BUILDER=python:3.11-bookworm@sha256:... \
#     image/build.sh                     # where a registry is reachable
#
# The project's wheel is not built here: the image's builder stage compiles the engine with
# mypyc (a C compiler is only there, in BUILDER: BASE's Python with gcc and its headers) from
# the source copied to image/wheels/source, with the build requirements the host fetched into
# image/wheels/build; the runtime stages install the wheel it made.
#
# Environment: BASE, BUILDER, PYTHON (default .venv/bin/python, else python3), KAEL_IMAGE_SOURCE
# (the org.opencontainers.image.source label; default: git's origin URL), KAEL_APPLIANCE_IMAGE
# (tag only this name instead of `:<version>` and `:latest`, e.g. on an engine shared by
# several checkouts).
set -euo pipefail
cd "$(dirname "$0")/.."
started=$(date +%s)
say() { echo "build: $*"; }
step() { say "$1 in $(( $(date +%s) - $2 )) s"; }

python="${PYTHON:-.venv/bin/python}"
[ -x "$python" ] || python=python3
# One build at a time per checkout (the wheels dir is rebuilt from scratch).
mkdir -p .tools
exec 9>.tools/image-build.lock
flock 9
version=$("$python" -c 'import tomllib; print(tomllib.load(open("pyproject.toml", "rb"))["project"]["version"])')
image="kael-thread-rebuild"

t=$(date +%s)
# Dependencies and the build requirements ([build-system] requires) are built again only when
# constraints.txt or pyproject.toml change; the project's source is copied every time (the
# builder stage's cache follows its content).
export SOURCE_DATE_EPOCH=315532800
stamp=$(cat constraints.txt pyproject.toml | sha256sum | cut -c1-16)
pip_wheel() {
  "$python" -m pip wheel -q --disable-pip-version-check "$@" \
    2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
}
if [ "$(cat image/wheels/.stamp 2>/dev/null)" != "$stamp" ]; then
  rm -rf image/wheels
  # The project's own (pure) wheel comes out too; the builder stage makes the one installed.
  KAEL_COMPILE=0 pip_wheel -c constraints.txt -w image/wheels .
  rm -f image/wheels/kael_thread_rebuild-*.whl
  mapfile -t build_requires < <("$python" -c 'import tomllib
print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["build-system"]["requires"]))')
  pip_wheel -c constraints.txt -w image/wheels/build "${build_requires[@]}"
  echo "$stamp" >image/wheels/.stamp
fi
rm -rf image/wheels/source
mkdir -p image/wheels/source
tar -c --exclude=__pycache__ --exclude='*.so' --exclude='*.egg-info' \
  pyproject.toml setup.py README.md src | tar -C image/wheels/source -x
step "wheels ($(find image/wheels -name '*.whl' | wc -l) files) and the source" "$t"

base="${BASE:-kael-base:bookworm}"
builder="${BUILDER:-kael-base:bookworm-build}"
if [ -z "${BASE:-}" ]; then
  t=$(date +%s)
  image/make-base.sh --name "$base"
  step "base $base" "$t"
fi
if [ -z "${BUILDER:-}" ]; then
  t=$(date +%s)
  image/make-base.sh --name "$builder" --variant builder
  step "builder base $builder" "$t"
fi

revision=$(git rev-parse HEAD 2>/dev/null || echo unknown)
if [ -n "$(git status --porcelain 2>/dev/null)" ]; then
  revision="$revision-dirty"
  created=$(date -u +%Y-%m-%dT%H:%M:%SZ)
else  # a clean tree builds the same labels every time (and keeps the build cache)
  created=$(date -u -d "@$(git log -1 --format=%ct 2>/dev/null || date +%s)" +%Y-%m-%dT%H:%M:%SZ)
fi
source_url="${KAEL_IMAGE_SOURCE:-$(git config --get remote.origin.url 2>/dev/null || echo unknown)}"

if [ -n "${KAEL_APPLIANCE_IMAGE:-}" ]; then
  tags=(-t "$KAEL_APPLIANCE_IMAGE") built="$KAEL_APPLIANCE_IMAGE"
else
  tags=(-t "$image:$version" -t "$image:latest") built="$image:$version"
fi
t=$(date +%s)
# Legacy builder (no buildx here); its deprecation notice is shown only when the build fails.
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
if ! DOCKER_BUILDKIT=0 docker build -f image/Containerfile \
  --build-arg BASE="$base" --build-arg BUILDER="$builder" \
  --build-arg VERSION="$version" --build-arg REVISION="$revision" \
  --build-arg CREATED="$created" --build-arg SOURCE="$source_url" \
  "${tags[@]}" image/ >"$log" 2>&1; then
  tail -n 40 "$log" >&2
  echo "build: docker build failed" >&2
  exit 1
fi
step "image $built" "$t"

size=$(docker image inspect -f '{{.Size}}' "$built")
say "$built is $(( size / 1000000 )) MB ($size bytes), base $base, builder $builder"
# The advisor's image, from the appliance image just built (image/advisor/).
image/advisor/build.sh "$built"
say "done in $(( $(date +%s) - started )) s"
