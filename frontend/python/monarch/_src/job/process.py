"""Monarch's ``ProcessJob``: a job whose hosts are processes of this
machine (docs/python.md, "Jobs").

Each host of each mesh is a ``monarch-host`` agent (docs/multi-host.md)
listening on 127.0.0.1, started in a session of its own so that it outlives
the client that applied the job: a job file (``dump`` / ``job_load``) lets
another process attach to the same agents. The job secret is in a 0700
directory of the job's own, with the agents' logs; ``kill()`` ends the agents
(SIGTERM: each stops what it runs; SIGKILL after a grace period) and removes
the directory.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from typing import Any, Dict, List, NamedTuple, Optional

from ..actor.host_mesh import attach_hosts
from ..common.binaries import build_binary
from .job import JobState, JobTrait, job_secret_file, write_job_secret

_SERVING = re.compile(r"serving on tcp://(\S+)")
_START_TIMEOUT_S = 30.0
_KILL_GRACE_S = 10.0
_POLL_S = 0.02


class ProcessState(NamedTuple):
    """One host of the job: its agent's pid and ``HOST:PORT``."""

    pid: int
    address: str


class ProcessJob(JobTrait):
    """``ProcessJob({"trainers": 2, "dataloaders": 1})``: host meshes of local
    agent processes; ``state().trainers`` is a mesh of 2 hosts."""

    def __init__(self, meshes: Dict[str, int], env: Optional[Dict[str, str]] = None):
        if not isinstance(meshes, dict) or not meshes:
            raise TypeError(f"ProcessJob takes {{mesh name: number of hosts}}, got {meshes!r}")
        for name, count in meshes.items():
            if not isinstance(name, str) or not name:
                raise TypeError(f"ProcessJob: a mesh name is a non-empty str, got {name!r}")
            if isinstance(count, bool) or not isinstance(count, int) or count < 1:
                raise ValueError(f"ProcessJob: mesh '{name}' needs a positive number of hosts, "
                                 f"got {count!r}")
        super().__init__()
        self._meshes = dict(meshes)
        self._env = dict(env) if env else None
        self._hosts: Dict[str, ProcessState] = {}
        self._dir: Optional[str] = None
        self._children: List[subprocess.Popen] = []  # this process's (not pickled)

    def __getstate__(self) -> Dict[str, Any]:
        state = dict(self.__dict__)
        state["_children"] = []
        return state

    @property
    def _secret_file(self) -> str:
        assert self._dir is not None
        return job_secret_file(self._dir)

    # -- JobTrait ------------------------------------------------------------------
    def _create(self, client_script: Optional[str]) -> None:
        if client_script is not None:
            raise RuntimeError("ProcessJob cannot run batch-mode scripts")
        binary = build_binary("monarch-host")
        if not binary:
            raise RuntimeError("ProcessJob: no monarch-host binary in the build tree (build "
                               "target monarch-host)")
        self._dir = tempfile.mkdtemp(prefix="monarch-process-job-")
        write_job_secret(self._dir)
        try:
            for mesh, count in self._meshes.items():
                for i in range(count):
                    key = f"{mesh}_{i}"
                    self._hosts[key] = self._start_agent(binary, key)
        except BaseException:
            self._kill()  # the agents already started must not leak
            raise

    def _start_agent(self, binary: str, key: str) -> ProcessState:
        assert self._dir is not None
        log = os.path.join(self._dir, f"{key}.log")
        env = dict(os.environ, **(self._env or {}))
        with open(log, "w") as out:
            proc = subprocess.Popen(
                [binary, "--listen", "tcp://127.0.0.1:0", "--name", key,
                 "--secret-file", self._secret_file],
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env,
                start_new_session=True)
        self._children.append(proc)
        deadline = time.monotonic() + _START_TIMEOUT_S
        while True:
            with open(log) as f:
                m = _SERVING.search(f.read())
            if m:
                return ProcessState(proc.pid, m.group(1))
            if proc.poll() is not None or time.monotonic() > deadline:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
                with open(log) as f:
                    said = f.read().strip()
                raise RuntimeError(f"ProcessJob: the monarch-host of host '{key}' did not start "
                                   f"within {_START_TIMEOUT_S:.0f} s (exit status {proc.poll()})"
                                   + (f": {said}" if said else ""))
            time.sleep(_POLL_S)

    def _state(self) -> JobState:
        if not self._pids_active():
            raise RuntimeError("ProcessJob: lost connection to the job's host processes "
                               "(an agent is gone)")
        return JobState({
            mesh: attach_hosts([self._hosts[f"{mesh}_{i}"].address for i in range(count)],
                               secret_file=self._secret_file)
            for mesh, count in self._meshes.items()})

    def can_run(self, spec: JobTrait) -> bool:
        return (isinstance(spec, ProcessJob) and spec._meshes == self._meshes
                and self._pids_active())

    def _pids_active(self) -> bool:
        return bool(self._hosts) and all(_alive(h.pid) for h in self._hosts.values())

    def _kill(self) -> None:
        pids = [h.pid for h in self._hosts.values()]
        for pid in pids:
            _signal(pid, signal.SIGTERM)
        deadline = time.monotonic() + _KILL_GRACE_S
        while time.monotonic() < deadline and any(self._live(pid) for pid in pids):
            time.sleep(_POLL_S)
        for pid in pids:
            if self._live(pid):
                _signal(pid, signal.SIGKILL)
        for proc in self._children:
            proc.wait()
        self._children = []
        self._hosts = {}
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def _live(self, pid: int) -> bool:
        """Whether the agent ``pid`` still runs; this process's own children
        are reaped as they end."""
        for proc in self._children:
            if proc.pid == pid:
                return proc.poll() is None
        return _alive(pid)


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def _alive(pid: int) -> bool:
    """A process that exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")
