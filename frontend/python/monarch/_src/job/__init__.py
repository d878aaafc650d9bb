"""Monarch's jobs (``monarch.job``) on this runtime: the host meshes of a
job's state are ``this_host()`` or local ``monarch-host`` agents
(docs/python.md, "Jobs")."""
