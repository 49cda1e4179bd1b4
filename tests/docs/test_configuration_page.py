"""docs/configuration.md is what the generator prints from the config model: it cannot drift."""

from __future__ import annotations

import subprocess
import sys

from kael_thread_rebuild.config import Config
from kael_thread_rebuild.docs_config import render
from tests.docs.conftest import REPO

PAGE = REPO / "docs" / "configuration.md"


def test_the_committed_page_is_what_the_generator_prints() -> None:
    printed = subprocess.run([sys.executable, "-m", "kael_thread_rebuild.docs_config"],
                             capture_output=True, text=True, check=True, cwd=REPO).stdout
    assert PAGE.read_text(encoding="utf-8") == printed, (
        "docs/configuration.md is stale: run `python -m kael_thread_rebuild.docs_config "
        "--write docs/configuration.md`")


def test_every_key_has_a_row_with_its_description_and_bounds() -> None:
    page = render()
    for name, field in Config.model_fields.items():
        rows = [line for line in page.splitlines() if line.startswith(f"| `{name}` |")]
        assert len(rows) == 1, name
        assert field.description and field.description.replace("|", "\\|") in rows[0], name
    row = next(line for line in page.splitlines() if line.startswith("| `stability_samples` |"))
    assert "| integer | `2` | 2 to 100 |" in row
    row = next(line for line in page.splitlines() if line.startswith("| `project_dir` |"))
    assert "| path | required |" in row
