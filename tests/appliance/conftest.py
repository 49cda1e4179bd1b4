"""Fixtures of the appliance tests: the engine, the image, a private instance and a household.

Without a reachable Docker engine every test here is skipped with the reason; with one (CI
always has one) nothing is skipped.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

from . import engine
from .household import Household, make_household


@pytest.fixture(scope="session")
def dock() -> docker.DockerClient:
    problem = engine.engine_problem()
    if problem:
        pytest.skip(problem)
    return engine.client()


@pytest.fixture(scope="session")
def image(dock: docker.DockerClient) -> str:
    """The image's id, not its tag: another build on this machine may move the tag meanwhile,
    and doctor's version check compares the daemon's image with the one it is given."""
    image_id: str = dock.images.get(engine.ensure_image(dock)).id
    return image_id


@pytest.fixture
def appliance(dock: docker.DockerClient, image: str) -> Iterator[engine.Instance]:
    with engine.instance(dock, image) as made:
        yield made


@pytest.fixture
def household(tmp_path: Path, appliance: engine.Instance) -> Household:
    return make_household(tmp_path, appliance.name, engine.TEST_UID, engine.TEST_GID)
