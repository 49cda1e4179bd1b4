"""What only the host can see (the Docker engine, the Claude user's access), gathered by
image/run-doctor.sh or the installer's doctor role and handed in as JSON in $KAEL_HOST_FACTS."""

from __future__ import annotations

from typing import Any

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError, field_validator

#: JSON facts only the host can gather (Docker); see `HostFacts`.
HOST_FACTS_ENV = "KAEL_HOST_FACTS"


class HostContainer(BaseModel):
    """A container as the host's Docker engine lists it: in our spelling, or as the Engine API
    lists it (`Id`, `Names`, `State`, `Status`, which the installer passes on as it got them)."""

    model_config = ConfigDict(extra="ignore")

    id: str = Field("", validation_alias=AliasChoices("id", "Id", "ID"))
    name: str = Field("", validation_alias=AliasChoices("name", "Names", "Name"))
    state: str = Field("", validation_alias=AliasChoices("state", "State"))
    status: str = Field("", validation_alias=AliasChoices("status", "Status"))

    @field_validator("name", mode="before")
    @classmethod
    def _plain_name(cls, value: Any) -> Any:
        if isinstance(value, list):  # the API's Names: ["/NAME"]
            value = value[0] if value else ""
        return value.lstrip("/") if isinstance(value, str) else value  # inspect's /NAME

    @property
    def label(self) -> str:
        """How the container is named in a finding: its name, else its short id."""
        return self.name or self.id[:12]


class HostImage(BaseModel):
    model_config = ConfigDict(extra="ignore")

    ref: str = ""  # what was asked for, e.g. kael-thread-rebuild:latest
    id: str = ""
    labels: dict[str, str] | None = None  # Docker gives null for none


class HostDaemon(HostContainer):
    image_id: str = ""
    image_labels: dict[str, str] | None = None
    engine: str = ""  # `kael-thread-rebuild --version` in the container, when it runs


class ClaudeAccess(BaseModel):
    """How the Claude user reaches the appliance, tried on the host as that user: its groups,
    whether it can use the Docker socket, and which of the wrapper's lines of this instance
    (`mcp NAME`, `hook NAME`; the pointer runner's `wait NAME`, `start-failed NAME`) sudo allows
    it (`sudo -l -U`, which runs nothing)."""

    model_config = ConfigDict(extra="ignore")

    user: str = ""
    uid: int | None = None
    groups: list[str] = []
    socket: str = ""
    socket_reachable: bool | None = None  # None: it could not be tried
    socket_detail: str = ""
    wrapper: str = ""
    allowed: list[str] = []


class HostFacts(BaseModel):
    """What only the host can see (the Docker engine, the Claude user's access), gathered by
    image/run-doctor.sh or the installer's doctor role and passed in as JSON in
    $KAEL_HOST_FACTS."""

    model_config = ConfigDict(extra="ignore")

    collected_by: str = ""
    installed_image: HostImage | None = None  # None: not on the host
    daemons: list[HostDaemon] = []  # containers labelled role=daemon for this instance
    mcp_containers: list[HostContainer] = []  # containers labelled role=mcp for this instance
    claude_access: ClaudeAccess | None = None  # None: not gathered


def parse_host_facts(raw: str | None) -> HostFacts | str | None:
    """The host's facts; None when none were given, a string when they do not parse."""
    if not raw:
        return None
    try:
        return HostFacts.model_validate_json(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "(the document)"
        return f"${HOST_FACTS_ENV} does not hold the host's facts: {where}: {first['msg']}"
