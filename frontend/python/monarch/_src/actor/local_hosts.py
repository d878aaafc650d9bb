"""``hosts_from_config(name)``: Monarch's host mesh "from the project's
configuration" (docs/python.md, "Monarch compatibility").

Monarch's own is a stand-in that starts two local host workers; here:

* ``$<name>`` set (``MONARCH_HOSTS=node1:29650,node2:29650``): those running
  ``monarch-host`` agents, with the job secret in ``$<name>_SECRET_FILE``
  (``attach_hosts``, docs/multi-host.md);
* unset: the same stand-in as Monarch's -- two ``monarch-host`` agents on
  this machine (127.0.0.1, a fresh secret in a 0700 directory removed at
  exit; the runtime's private directory would start the runtime on a local
  socket, which hosts cannot reach), with one warning. The agents are this process's: they get
  SIGTERM when it ends, however it ends (PR_SET_PDEATHSIG), after everything
  that ran on them -- an atexit hook would run before the meshes' own.
"""

from __future__ import annotations

import atexit
import ctypes
import os
import re
import secrets
import shutil
import signal
import subprocess
import tempfile
import threading
import warnings
from typing import List, Tuple

from ..common.binaries import build_binary
from .host_mesh import HostMesh, attach_hosts

STAND_IN_HOSTS = 2
_SERVING = re.compile(r"serving on tcp://(\S+)")
_agents: List[subprocess.Popen] = []
_lock = threading.Lock()


def hosts_from_config(name: str) -> HostMesh:
    """The host mesh ``name`` of the configuration: ``$<name>`` lists agents'
    ``HOST:PORT``s (secret in ``$<name>_SECRET_FILE``); unset, two local
    agents stand in, as in Monarch."""
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
                  "monarch-host agents stand in for the hosts (as Monarch's stand-in does)",
                  RuntimeWarning, stacklevel=2)
    addrs, secret_file = _start_local_agents(name, STAND_IN_HOSTS)
    return attach_hosts(addrs, secret_file=secret_file)


def stop_agents(timeout_s: float = 10.0) -> None:
    """Ends the stand-in agents this process started (shutdown_context):
    SIGTERM, then SIGKILL for one still there after ``timeout_s``."""
    with _lock:
        agents = list(_agents)
        _agents.clear()
    for proc in agents:
        if proc.poll() is None:
            proc.terminate()
    for proc in agents:
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def _die_with_parent() -> None:  # in the child, before exec
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG: monarch-host cleans up on it


def _start_local_agents(name: str, n: int, timeout_s: float = 30.0) -> Tuple[List[str], str]:
    binary = build_binary("monarch-host")
    if not binary:
        raise RuntimeError("hosts_from_config: no monarch-host binary in the build tree "
                           "(build target monarch-host), needed to stand in for the hosts")
    directory = tempfile.mkdtemp(prefix="monarch-hosts-")
    atexit.register(shutil.rmtree, directory, True)
    secret_file = os.path.join(directory, f"{name}.secret")
    fd = os.open(secret_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(secrets.token_hex(32) + "\n")
    addrs = []
    for i in range(n):
        proc = subprocess.Popen(
            [binary, "--listen", "tcp://127.0.0.1:0", "--name", f"{name}-{i}",
             "--secret-file", secret_file],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
            preexec_fn=_die_with_parent)
        with _lock:
            _agents.append(proc)
        addrs.append(_serving_address(proc, timeout_s))
    return addrs, secret_file


def _serving_address(proc: subprocess.Popen, timeout_s: float) -> str:
    """The agent's first line says where it serves; waited for at most
    ``timeout_s``."""
    found: List[str] = []

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            m = _SERVING.search(line) if not found else None
            if m:
                found.append(m.group(1))
            # Read on: an agent must never block on a full stdout pipe.

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    deadline = timeout_s
    while not found and deadline > 0 and proc.poll() is None:
        reader.join(0.05)
        deadline -= 0.05
    if not found:
        proc.kill()
        raise RuntimeError(f"hosts_from_config: a local monarch-host did not start within "
                           f"{timeout_s:.0f} s (exit status {proc.poll()})")
    return found[0]
