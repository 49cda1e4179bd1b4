"""The installer as its users get it: the collection `kael.appliance` built from this checkout
with `ansible-galaxy collection build` and installed from the tarball with `ansible-galaxy
collection install --offline`, into a directory of its own. The tests, the demo and Molecule run
the playbooks from there by their fully qualified names, so what is tested is what users install.

    python -m tests.support.collection DIR

builds and installs into DIR and prints the path for ANSIBLE_COLLECTIONS_PATH.
"""

from __future__ import annotations

import argparse
import atexit
import functools
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
NAMESPACE, NAME = "kael", "appliance"
FQCN = f"{NAMESPACE}.{NAME}"


class CollectionError(RuntimeError):
    """ansible-galaxy could not build or install the collection."""


def _galaxy(*args: str, cwd: Path) -> str:
    done = subprocess.run([str(VENV_BIN / "ansible-galaxy"), "collection", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=300, check=False)
    if done.returncode != 0:
        raise CollectionError(f"ansible-galaxy collection {args[0]} failed "
                              f"(exit {done.returncode}): {done.stdout}{done.stderr}")
    return done.stdout


def build(into: Path) -> Path:
    """The tarball `kael-appliance-VERSION.tar.gz` of this checkout, written into INTO."""
    into.mkdir(parents=True, exist_ok=True)
    _galaxy("build", "--force", "--output-path", str(into), str(REPO), cwd=into)
    tarballs = sorted(into.glob(f"{NAMESPACE}-{NAME}-*.tar.gz"))
    if len(tarballs) != 1:
        raise CollectionError(f"expected one tarball in {into}, found {tarballs}")
    return tarballs[0]


def install(tarball: Path, collections: Path) -> Path:
    """TARBALL installed under COLLECTIONS (ANSIBLE_COLLECTIONS_PATH), without a network: the
    dependencies (community.docker) must already be installed, as the ansible package has them."""
    _galaxy("install", "--offline", "--force", "-p", str(collections), str(tarball),
            cwd=collections.parent)
    root = collections / "ansible_collections" / NAMESPACE / NAME
    if not (root / "MANIFEST.json").is_file():
        raise CollectionError(f"{tarball.name} installed no collection at {root}")
    return collections


def build_and_install(into: Path) -> Path:
    """The collection built into INTO/dist and installed into INTO/collections; that path."""
    return install(build(into / "dist"), into / "collections")


@functools.cache
def installed() -> Path:
    """This process's installed collection (built once, removed when the process ends): the
    path for ANSIBLE_COLLECTIONS_PATH."""
    into = Path(tempfile.mkdtemp(prefix="kael-collection-"))
    atexit.register(shutil.rmtree, into, True)
    return build_and_install(into)


def playbook(name: str) -> str:
    """The FQCN of one of the collection's playbooks (`install`, `doctor`, ...)."""
    return f"{FQCN}.{name.removesuffix('.yml')}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("into", type=Path, help="a directory for the tarball and the install")
    args = parser.parse_args(argv)
    try:
        print(build_and_install(args.into.resolve()))
    except CollectionError as exc:
        print(f"collection: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
