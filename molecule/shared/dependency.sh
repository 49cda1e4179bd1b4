#!/usr/bin/env bash
# Molecule's dependency step of every scenario:
#   dependency.sh EPHEMERAL_DIRECTORY [BUILD_ARGUMENTS...]
# the images (built once, shared by the scenarios; BUILD_ARGUMENTS go to molecule/images/build.sh),
# then the collection kael.appliance built from this checkout and installed from its tarball into
# the scenario's own EPHEMERAL_DIRECTORY/collection (ANSIBLE_COLLECTIONS_PATH in molecule.yml): a
# scenario runs the playbooks and roles users install, never the checkout's.
# Every scenario turns Molecule's prerun off (`prerun: false`): it installs the checkout's
# collection into the default ~/.ansible/collections, one tree for the scenarios CI runs at
# once (one scenario's install deleted the tree another was copying into), and no scenario
# reads it there.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
ephemeral=${1:?usage: dependency.sh EPHEMERAL_DIRECTORY [BUILD_ARGUMENTS...]}
shift
"$root/molecule/images/build.sh" "$@"
cd "$root"
"$root/.venv/bin/python" -m tests.support.collection "$ephemeral/collection"
