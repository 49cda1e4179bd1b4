#!/usr/bin/python
"""Ansible module: the advisor's provider in the Kimi Code CLI's config.toml, merged with the
user's own keys and taken out again exactly."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: kimi_config
short_description: The advisor's provider and model in the Kimi Code CLI's config.toml
description:
  - With O(state=present), puts two marked blocks into C($KIMI_CODE_HOME/config.toml), first in
    the file C(default_model = NAME) and C(telemetry = false) (top-level keys must come before
    any table), last C([providers.NAME]) (O(type), O(base_url), O(api_key)), C([models.NAME])
    (C(provider), O(model), O(max_context_size)) and C([model_catalog] refresh_on_start = false),
    so the CLI neither reports nor fetches anything beyond the provider. Every other byte of the
    user's file stays; a key the user set already (C(telemetry), C([model_catalog])) is left as
    the user set it, with a warning where it differs. A C(default_model), C([providers.NAME]) or
    C([models.NAME]) of the user's is refused (nothing written); the advisor would not be the
    one configured.
  - With O(state=absent), removes both blocks; the file is as it was before, byte for byte, or
    gone if install created it and nothing else is in it.
  - A new file gets mode 0600 (it holds the key); an existing one keeps its owner, and its mode
    loses the group's and others' bits (uninstall leaves it so). The
    result is checked with C(tomllib) where the host's Python has it.
  - The key never appears in the result or the diff (every C(api_key) line is masked there); run
    the task with C(no_log) all the same.
  - Run it as the user whose home this is (C(become_user)).
version_added: "0.1.0"
options:
  path:
    description: The config file (C($KIMI_CODE_HOME/config.toml)).
    type: path
    required: true
  state:
    description: Whether the advisor's provider should be present or absent.
    type: str
    choices: [present, absent]
    default: present
  name:
    description: The name of the provider and of the model alias (the C(default_model)).
    type: str
    default: kael-advisor
  type:
    description: The provider's API (C(openai), C(kimi), C(anthropic)...).
    type: str
    default: openai
  base_url:
    description: The provider's base URL. Required with O(state=present).
    type: str
  api_key:
    description: The provider's key. Required with O(state=present).
    type: str
  model:
    description: The provider's model name. Required with O(state=present).
    type: str
  max_context_size:
    description: The model's context size in tokens.
    type: int
    default: 262144
  created:
    description: With O(state=absent), whether install created the file (removed when empty).
    type: bool
    default: false
extends_documentation_fragment:
  - kael.appliance.module
attributes:
  diff_mode:
    support: full
"""

EXAMPLES = r"""
- name: The advisor's provider
  kael.appliance.kimi_config:
    path: /home/alice/.kimi-code/config.toml
    base_url: https://api.example/v1
    model: kimi-for-coding
    api_key: "{{ vault_kimi_key }}"
  no_log: true
"""

RETURN = r"""
created:
  description: Whether this run created the file.
  returned: success
  type: bool
"""

import json
import os
import re

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.kael.appliance.plugins.module_utils.kael_file_write import read_text, write
from ansible_collections.kael.appliance.plugins.module_utils.kael_marked import (
    find,
    with_block,
    without,
)
from ansible_collections.kael.appliance.plugins.module_utils.kael_user_files import root_refusal

try:  # Python 3.11+: the result is checked to be TOML the CLI can read
    import tomllib
except ImportError:  # pragma: no cover - older hosts write without the check
    tomllib = None  # type: ignore[assignment]

TOP = ("# kael-advisor: begin (added by the kael-advisor installer; removed by its uninstall)",
       "# kael-advisor: end")
TABLES = ("# kael-advisor: tables begin (added by the kael-advisor installer; removed by its "
          "uninstall)", "# kael-advisor: tables end")
#: The tables' first line when install had to end the user's last line first.
TABLES_AFTER_NEWLINE = TABLES[0].replace("tables begin", "tables begin after the newline it added")
_HEADER = re.compile(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")
_KEY = re.compile(r"^\s*([A-Za-z0-9_.\"'-]+?)\s*=\s*(.*?)\s*$")
_SECRET = re.compile(r"(?m)^(\s*api_key\s*=\s*).*$")


def _toml(value: object) -> str:
    return json.dumps(value, ensure_ascii=False) if isinstance(value, str) else \
        str(value).lower() if isinstance(value, bool) else str(value)


def _strip(text: str) -> str:
    """TEXT without our blocks (the newline install added before the tables taken out too)."""
    text = without(text, *TOP)
    found = find(text, TABLES_AFTER_NEWLINE, TABLES[1])
    if found is not None:
        return text[:found[0] - 1] + text[found[1]:]
    return without(text, *TABLES)


def _keys(text: str) -> tuple[dict[str, str], set[str]]:
    """The top-level keys of TEXT (name -> value as written) and its table names."""
    top: dict[str, str] = {}
    tables: set[str] = set()
    table = None
    for line in text.splitlines():
        header = _HEADER.match(line)
        if header:
            table = header.group(1).replace('"', "").replace("'", "")
            tables.add(table)
            continue
        key = _KEY.match(line)
        if key and table is None:
            top[key.group(1)] = key.group(2)
    return top, tables


def merged(text: str, params: dict) -> tuple[str, list[str], list[str]]:
    """TEXT with our blocks: (the text, warnings, refusals)."""
    user = _strip(text)
    top, tables = _keys(user)
    name = params["name"]
    refusals = [f"the user's {what} is set already" for what, there in (
        ("default_model", "default_model" in top), (f"[providers.{name}]", f"providers.{name}" in
                                                    tables),
        (f"[models.{name}]", f"models.{name}" in tables)) if there]
    warnings = []
    top_lines = [f"default_model = {_toml(name)}"]
    if "telemetry" not in top:
        top_lines.append("telemetry = false")
    elif top["telemetry"].split("#")[0].strip() != "false":
        warnings.append(f"telemetry = {top['telemetry']} is the user's: left as found (the "
                        "advisor's runs set KIMI_DISABLE_TELEMETRY=1)")
    table_lines = [f"[providers.{name}]", f"type = {_toml(params['type'])}",
                   f"base_url = {_toml(params['base_url'])}",
                   f"api_key = {_toml(params['api_key'])}", "",
                   f"[models.{name}]", f"provider = {_toml(name)}",
                   f"model = {_toml(params['model'])}",
                   f"max_context_size = {params['max_context_size']}"]
    if "model_catalog" in tables:
        warnings.append("[model_catalog] is the user's: left as found (refresh_on_start = false "
                        "keeps the CLI from fetching the catalogue)")
    else:
        table_lines += ["", "[model_catalog]", "refresh_on_start = false"]
    result = with_block(user, "\n".join([TOP[0], *top_lines, TOP[1]]) + "\n", first=True)
    opening = TABLES[0] if not result or result.endswith("\n") else TABLES_AFTER_NEWLINE
    tables_block = "\n".join([opening, *table_lines, TABLES[1]]) + "\n"
    result = result + ("" if opening == TABLES[0] else "\n") + tables_block
    return result, warnings, refusals


def _masked(text: str) -> str:
    return _SECRET.sub(r"\1(hidden)", text)


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "path": {"type": "path", "required": True},
            "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
            "name": {"type": "str", "default": "kael-advisor"},
            "type": {"type": "str", "default": "openai"},
            "base_url": {"type": "str"},
            "api_key": {"type": "str", "no_log": True},
            "model": {"type": "str"},
            "max_context_size": {"type": "int", "default": 262144},
            "created": {"type": "bool", "default": False},
        },
        required_if=[("state", "present", ("base_url", "api_key", "model"))],
        supports_check_mode=True,
    )
    params = module.params
    problem = root_refusal(params["path"])
    if problem is not None:
        module.fail_json(msg=problem)
    path = os.path.realpath(params["path"])
    try:
        _data, original = read_text(path)
    except (OSError, UnicodeDecodeError) as exc:
        module.fail_json(msg=f"{path} cannot be read as uid {os.geteuid()}: {exc}")
    exists = os.path.exists(path)
    remove = False
    if params["state"] == "present":
        text, warnings, refusals = merged(original, params)
        if refusals:
            module.fail_json(msg=f"{path}: {'; '.join(refusals)}, so the advisor's provider "
                                 "would not be the default; nothing was written. Take it out "
                                 "(or give the advisor its own KIMI_CODE_HOME) and run again.")
    else:
        text, warnings = _strip(original), []
        remove = exists and params["created"] and not text.strip() and text != original
    if tomllib is not None and not remove:
        try:
            tomllib.loads(text)
        except ValueError as exc:
            module.fail_json(msg=f"{path}: the merged file would not be TOML the Kimi Code CLI "
                                 f"reads ({exc}); nothing was written")
    for warning in warnings:
        module.warn(f"{path}: {warning}")
    loose = exists and params["state"] == "present" and os.stat(path).st_mode & 0o077
    changed = text != original or (not exists and params["state"] == "present") or bool(loose)
    result = {"changed": changed, "path": path,
              "created": not exists and params["state"] == "present"}
    if changed:
        result["diff"] = {"before": _masked(original), "after": "" if remove else _masked(text),
                          "before_header": path, "after_header": path}
    if module.check_mode or not changed:
        module.exit_json(**result)
    try:
        if remove:
            os.unlink(path)
        else:
            write(module, path, text, new_mode=0o600)
            if params["state"] == "present":  # it holds the key: the user's alone
                os.chmod(path, os.stat(path).st_mode & 0o700)
    except OSError as exc:
        module.fail_json(msg=f"cannot write {path}: {exc}", **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
