#!/usr/bin/env bash
# Molecule's dependency step of every scenario:
#   dependency.sh EPHEMERAL_DIRECTORY [BUILD_ARGUMENTS...]
# the images (built once, shared by the scenarios; BUILD_ARGUMENTS go to molecule/images/build.sh),
# then the collection kael.appliance built from this checkout and installed from its tarball into
# the scenario's own EPHEMERAL_DIRECTORY/collection (ANSIBLE_COLLECTIONS_PATH in molecule.yml): a
# scenario runs the playbooks and roles users install, never the checkout's.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
ephemeral=${1:?usage: dependency.sh EPHEMERAL_DIRECTORY [BUILD_ARGUMENTS...]}
shift
"$root/molecule/images/build.sh" "$@"
cd "$root"
"$root/.venv/bin/python" -m tests.support.collection "$ephemeral/collection"
