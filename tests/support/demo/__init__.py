"""`.ci/demo`: a demo household installed by the real playbook and switched live (see
__main__.py)."""
