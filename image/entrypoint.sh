#!/bin/sh
# The image's entrypoint: `kael-thread-rebuild ARGS...`, unless the first argument names one of
# the image's own programs (kael-thread-rebuild, kael-thread-rebuild-mcp, kael-healthcheck,
# kael-mounts), which then runs as given. `exec`: no shell stays between Docker and the program.
set -eu
case "${1:-}" in
  kael-thread-rebuild|kael-thread-rebuild-mcp|kael-healthcheck|kael-mounts) exec "$@" ;;
  *) exec kael-thread-rebuild "$@" ;;
esac
