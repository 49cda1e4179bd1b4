"""The package built everywhere it runs (issue 26): with a C compiler the wheel holds the engine's
hot modules (`compiled_modules`: the scanner, the classifier and its table) compiled by mypyc,
without one `pip install` still works with them interpreted, and doctor says which engine runs.
Each build is pip's own (isolated, [build-system] requires from the index) of a copy of the
source, so nothing is built inside the checkout."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from kael_thread_rebuild.compiled_modules import COMPILED

REPO = Path(__file__).resolve().parents[2]
SOURCE = ("pyproject.toml", "setup.py", "README.md", "src")
SCANNER = "kael_thread_rebuild/transcript/scanner"
# Runs the doctor's engine check where the wheel was unpacked (the check reads no facts).
PROBE = ("from kael_thread_rebuild import compiled_modules as c\n"
         "from kael_thread_rebuild.doctor.engine import check_engine\n"
         "check = check_engine(None)\n"
         "compiled = [c.is_compiled(module) for module in c.modules()]\n"
         "print(all(compiled) if any(compiled) else False, check.ok, check.warning,\n"
         "      check.detail, sep='\\n')\n")


@dataclass
class Built:
    wheel: Path
    log: str


def copy_source(into: Path) -> Path:
    into.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.so", "*.egg-info")
    for name in SOURCE:
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, into / name, ignore=ignore)
        else:
            shutil.copy2(REPO / name, into / name)
    return into


def build_wheel(tmp: Path, **env: str) -> subprocess.CompletedProcess[str]:
    source = copy_source(tmp / "source")
    return subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", "--disable-pip-version-check",
         "-w", str(tmp / "out"), str(source)],
        capture_output=True, text=True, env={**os.environ, **env}, timeout=600)


def built(tmp: Path, **env: str) -> Built:
    done = build_wheel(tmp, **env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    [wheel] = (tmp / "out").glob("kael_thread_rebuild-*.whl")
    return Built(wheel, done.stdout + done.stderr)


def unpack(wheel: Path, into: Path) -> Path:
    """The wheel's files where an install would place them."""
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(into)
    return into


def run_probe(site: Path) -> list[str]:
    """The engine SITE's package runs (SITE imported before anything else), and its doctor."""
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(site)}, check=True)
    return done.stdout.splitlines()


def names(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as archive:
        return [name for name in archive.namelist() if name.startswith(SCANNER)]


def compiled_files(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as archive:
        return [name for name in archive.namelist() if name.endswith(".so")]


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> Built:
    return built(tmp_path_factory.mktemp("compiled"))


@pytest.fixture(scope="module")
def without_compiler(tmp_path_factory: pytest.TempPathFactory) -> Built:
    # CC names a program that is not there: what a machine without gcc looks like to setuptools.
    return built(tmp_path_factory.mktemp("pure"), CC="/nonexistent/cc")


def test_with_a_compiler_the_wheel_holds_the_compiled_engine(
        compiled: Built, tmp_path: Path) -> None:
    assert "-cp3" in compiled.wheel.name and "linux" in compiled.wheel.name, compiled.wheel.name
    built_ = compiled_files(compiled.wheel)
    with zipfile.ZipFile(compiled.wheel) as archive:
        files = archive.namelist()
    for module in COMPILED:
        path = module.replace(".", "/")
        assert any(name.startswith(f"{path}.cpython-") for name in built_), (module, built_)
        assert f"{path}.py" in files  # the source stays beside it
    compiled_, ok, warning, detail = run_probe(unpack(compiled.wheel, tmp_path / "site"))
    assert (compiled_, ok, warning) == ("True", "True", "False")
    assert detail.startswith("the transcript reader, the classifier and the branch walk run "
                             f"compiled ({len(COMPILED)} modules by mypyc)"), detail


def test_without_a_compiler_pip_builds_a_pure_wheel_whose_scanner_is_interpreted(
        without_compiler: Built, tmp_path: Path) -> None:
    assert without_compiler.wheel.name.endswith("-py3-none-any.whl"), without_compiler.wheel.name
    assert names(without_compiler.wheel) == [f"{SCANNER}.py"]
    assert compiled_files(without_compiler.wheel) == []
    assert "building the interpreted engine only: no C compiler" in without_compiler.log
    compiled_, ok, warning, detail = run_probe(unpack(without_compiler.wheel, tmp_path / "site"))
    assert (compiled_, ok, warning) == ("False", "True", "False")
    assert detail.startswith(
        "the transcript reader, the classifier and the branch walk run interpreted"), detail


def test_kael_compile_1_refuses_to_build_without_a_compiler(tmp_path: Path) -> None:
    done = build_wheel(tmp_path, CC="/nonexistent/cc", KAEL_COMPILE="1")
    assert done.returncode != 0
    assert "KAEL_COMPILE=1 but no C compiler" in done.stdout + done.stderr
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").glob("*.whl"))


def test_kael_compile_0_builds_a_pure_wheel_even_with_a_compiler(tmp_path: Path) -> None:
    wheel = built(tmp_path, KAEL_COMPILE="0").wheel
    assert wheel.name.endswith("-py3-none-any.whl") and compiled_files(wheel) == []


def test_a_stale_compiled_module_in_a_checkout_is_named(
        compiled: Built, tmp_path: Path) -> None:
    """An editable install's records.py edited after its compiled module was built: doctor warns
    that the old rules run, and says how to rebuild (README, "Development")."""
    site = unpack(compiled.wheel, tmp_path / "site")
    [dist_info] = site.glob("kael_thread_rebuild-*.dist-info")
    (dist_info / "direct_url.json").write_text(json.dumps(
        {"url": "file:///checkout", "dir_info": {"editable": True}}))
    source = site / "kael_thread_rebuild/conversation/records.py"
    built_at = source.stat().st_mtime + 10  # as the editable build leaves them: modules last
    for module in site.rglob("*.so"):
        os.utime(module, (built_at, built_at))
    assert run_probe(site)[1:3] == ["True", "False"]
    os.utime(source, (built_at + 10, built_at + 10))  # then records.py is edited
    _, ok, warning, detail = run_probe(site)
    assert (ok, warning) == ("True", "True")
    assert "older than records.py" in detail and "the rules run as they were" in detail, detail


def test_the_build_requirements_pin_mypy_as_the_project_does() -> None:
    requires = tomllib.loads((REPO / "pyproject.toml").read_text())["build-system"]["requires"]
    pinned = [line for line in (REPO / "constraints.txt").read_text().splitlines()
              if line.startswith("mypy==")]
    assert pinned and pinned[0] in requires
