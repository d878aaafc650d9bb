"""``hosts_from_config(name)``: Monarch's host mesh "from the project's
configuration" (docs/python.md, "Monarch compatibility").

* ``$<name>`` set (``MONARCH_HOSTS=node1:29650,node2:29650``): those running
  ``monarch-host`` agents, with the job secret in ``$<name>_SECRET_FILE``
  (``attach_hosts``, docs/multi-host.md);
* unset: Monarch's stand-in, two "hosts" that are processes of this machine
  (one warning): ``spawn_procs(per_host)`` gives a local mesh
  ``{"hosts": 2, **per_host}``. Being local, it mixes with ``this_proc()`` and
  ``this_host()`` meshes in any order, as Monarch's getting started spawns
  on ``this_proc()`` first -- attached agents need the controller on TCP,
  which a local mesh made before them rules out.
"""

from __future__ import annotations

import os
import warnings

from .host_mesh import HostMesh, attach_hosts

STAND_IN_HOSTS = 2


def hosts_from_config(name: str) -> HostMesh:
    """The host mesh ``name`` of the configuration: ``$<name>`` lists agents'
    ``HOST:PORT``s (secret in ``$<name>_SECRET_FILE``); unset, two local
    "hosts" stand in, as in Monarch."""
    if not isinstance(name, str) or not name:
        raise TypeError(f"hosts_from_config takes the name of a host mesh (str), got {name!r}")
    listed = os.environ.get(name, "").strip()
    if listed:
        secret_file = os.environ.get(f"{name}_SECRET_FILE", "")
        if not secret_file:
            raise ValueError(f"hosts_from_config({name!r}): ${name} lists hosts but "
                             f"${name}_SECRET_FILE (the job secret, mode 0600) is not set")
        return attach_hosts([h.strip() for h in listed.split(",") if h.strip()],
                            secret_file=secret_file)
    warnings.warn(f"hosts_from_config({name!r}): ${name} is not set; {STAND_IN_HOSTS} local "
                  "hosts (processes of this machine) stand in for them, as Monarch's stand-in "
                  "does", RuntimeWarning, stacklevel=2)
    return HostMesh(STAND_IN_HOSTS, local_hosts_dim=True)
