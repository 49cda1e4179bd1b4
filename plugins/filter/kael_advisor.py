"""Filters of the kael_advisor role: who gets the advisor, from the inventory's entries."""

from __future__ import annotations

import base64
import json
from typing import Any

from ansible.errors import AnsibleFilterError

PROVIDER_FIELDS = ("base_url", "model", "api_key")
#: What an entry may name besides its user and provider (the role's argument spec says what).
OPTIONAL = ("roots", "network", "claude_config_dir", "claude_cli", "kimi_home", "state")


def kael_advisor_people(entries: Any, default_state: str) -> list[dict[str, Any]]:
    """The entries of `kael_advisor` without their provider (the key never leaves the variable
    but for the one no_log task that writes it), each with its state; an entry that lacks what
    it needs fails naming the user and the field, never a value."""
    if not isinstance(entries, list):
        raise AnsibleFilterError("kael_advisor must be a list of entries (user, provider, ...)")
    people = []
    for index, entry in enumerate(entries):
        if not isinstance(entry, dict) or not isinstance(entry.get("user"), str):
            raise AnsibleFilterError(f"kael_advisor[{index}] has no user (the Claude user's name)")
        unknown = sorted(set(entry) - {"user", "provider", *OPTIONAL})
        if unknown:
            raise AnsibleFilterError(f"kael_advisor[{index}] ({entry['user']}): unknown "
                                     f"{', '.join(unknown)}")
        state = entry.get("state", default_state)
        if state not in ("present", "absent"):
            raise AnsibleFilterError(f"kael_advisor[{index}] ({entry['user']}): state must be "
                                     "present or absent")
        provider = entry.get("provider")
        if state == "present":
            missing = [field for field in PROVIDER_FIELDS
                       if not isinstance(provider, dict) or not provider.get(field)]
            if missing:
                raise AnsibleFilterError(f"kael_advisor[{index}] ({entry['user']}): the provider "
                                         f"needs {', '.join(missing)}")
        person = {key: value for key, value in entry.items() if key != "provider"}
        person.update(state=state, index=index)
        people.append(person)
    users = [person["user"] for person in people]
    twice = sorted({user for user in users if users.count(user) > 1})
    if twice:
        raise AnsibleFilterError(f"kael_advisor names {', '.join(twice)} more than once")
    return people


def kael_advisor_records(slurped: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The install records (slurp's results) by user."""
    records = [json.loads(base64.b64decode(found["content"])) for found in slurped]
    return {record["user"]: record for record in records}


def kael_advisor_leftovers(records: dict[str, Any], people: list[dict[str, Any]]
                           ) -> list[dict[str, Any]]:
    """The recorded users no entry names, to remove."""
    named = {person["user"] for person in people}
    return [{"user": user, "state": "absent"} for user in sorted(records) if user not in named]


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"kael_advisor_people": kael_advisor_people,
                "kael_advisor_records": kael_advisor_records,
                "kael_advisor_leftovers": kael_advisor_leftovers}
