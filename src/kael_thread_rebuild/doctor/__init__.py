"""Doctor: read-only checks of everything a switch needs (spec: appliance, "Doctor").

Each check is a function of the shared `facts.Facts` returning one `model.Check`. Nothing here
writes: no file, no directory, no lock (the operation store is opened only when every directory
it would create already exists). Settling an unfinished operation is recovery, which belongs to
the daemon's start and the `recover` command: doctor only reports it.

The modules, by concern:

    model.py        Check and DoctorReport, the typed results
    facts.py        Facts: what several checks need, gathered once and only when asked for
    host_facts.py   what only the host can see (Docker, the Claude user's access), as handed in
    reading.py      tolerant readers of the files the checks look at
    files.py        files and config: project_dir, claude_workdir, state_dir, operations
    target.py       target and identity: target, session, claude_version
    resume.py       how a switch starts the session: resume_command, resume_start
    hooks.py        Claude Code integration, the Stop hook: stop_hook, hook_delivery
    mcp.py          Claude Code integration, the MCP server: mcp_server
    mcp_live.py     the MCP server as the live Claude Code has it: mcp_loaded
    engine.py       the scanner and classifier: compiled or interpreted, stale in a checkout: engine
    host.py         containers and versions (the host's facts): mcp_containers, versions,
                    claude_access
    runner.py       CHECKS, in the order they are shown, and run_doctor

Three checks need the host (orphaned MCP containers, image and daemon versions from the Docker
engine, which no appliance container can reach; the Claude user's access to Docker and to the
wrapper): the host gathers those facts (`image/run-doctor.sh`, the installer's doctor role) and
hands them in as JSON in `$KAEL_HOST_FACTS`; without it the three are skipped. Paths a
long-running container deliberately does not mount are named in `$KAEL_UNMOUNTED`, so that their
absence is not mistaken for a missing file.
"""
