#!/usr/bin/env bash
# Molecule's dependency step of every scenario: the images (built once, shared by the
# scenarios; the arguments go to molecule/images/build.sh), then the collection kael.appliance
# built from this checkout and installed from its tarball into the scenario's own directory
# (ANSIBLE_COLLECTIONS_PATH in molecule.yml): a scenario runs the playbooks and roles users
# install, never the checkout's.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
"$root/molecule/images/build.sh" "$@"
cd "$root"
"$root/.venv/bin/python" -m tests.support.collection "$MOLECULE_EPHEMERAL_DIRECTORY/collection"
