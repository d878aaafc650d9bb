"""Monarch's jobs (``monarch.job``) on this runtime: the host meshes of a
job's state are ``this_host()``, local ``monarch-host`` agents or agents on
the nodes of a SLURM batch job
(docs/python.md, "Jobs")."""
