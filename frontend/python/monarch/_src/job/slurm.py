"""Monarch's ``SlurmJob``: host meshes on the nodes of a SLURM batch job
(docs/python.md, "Jobs").

``apply()`` submits one ``sbatch`` job of all the meshes' nodes. Its batch
script runs one ``srun`` step of ``monarch-host`` agents (docs/multi-host.md),
``ntasks_per_node`` per node, each listening on a port of its own and
reporting its address on the step's labelled output; ``state()`` waits for
every agent's report (bounded: ``job_start_timeout``, queueing included) and
attaches to them, the first ``meshes[name] * ntasks_per_node`` agents in task
order being the first mesh, and so on. The job secret and the job's output
live in a 0700 directory under ``log_dir``, which the nodes must see at the
same path (a shared filesystem, as SLURM clusters have); ``kill()`` cancels
the job (``scancel``), waits for SLURM to end it and removes the directory.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import tempfile
import time
from typing import Any, Dict, List, Optional, Sequence

from ..actor.host_mesh import attach_hosts
from ..common.binaries import build_binary
from .job import JobState, JobTrait, job_secret_file, write_job_secret

# "3: monarch-host: host 'node1' serving on tcp://10.0.0.2:4000" (srun --label).
_SERVING = re.compile(r"^\s*(\d+): monarch-host: host '[^']*' serving on tcp://(\S+)",
                      re.MULTILINE)
_DEFAULT_START_TIMEOUT_S = 600.0
_KILL_TIMEOUT_S = 60.0
_POLL_S = 0.25
_COMMAND_TIMEOUT_S = 60.0
#: squeue states of a job that can still start or runs.
_LIVE_STATES = {"PENDING", "CONFIGURING", "RUNNING", "REQUEUED", "RESIZING", "SUSPENDED"}


class SlurmJob(JobTrait):
    """``SlurmJob({"trainers": 2, "dataloaders": 1}, partition="gpu")``: one
    batch job of 3 nodes; ``state().trainers`` is a mesh of the 2 hosts (x
    ``ntasks_per_node``) of the first nodes.

    Monarch's arguments, with these differences: ``python_exe`` (default:
    this interpreter's path) is the Python the agents start actor workers
    with; ``monarch_port`` 0 (the default here) lets each agent take a free
    port and report it (two agents of a node never collide); ``controller_host``
    (not Monarch's) is this machine's address as the nodes reach it, which
    the agents use to choose the address they advertise (default: their
    node's own choice); ``job_start_timeout`` None waits at most 600 s;
    ``out_of_cluster`` / ``attach_to`` (Monarch's gateway through a worker)
    are not supported."""

    def __init__(
        self,
        meshes: Dict[str, int],
        python_exe: Optional[str] = None,
        slurm_args: Sequence[str] = (),
        monarch_port: int = 0,
        job_name: str = "monarch_job",
        ntasks_per_node: int = 1,
        time_limit: Optional[str] = None,
        partition: Optional[str] = None,
        log_dir: Optional[str] = None,
        exclusive: bool = True,
        gpus_per_node: Optional[int] = None,
        cpus_per_task: Optional[int] = None,
        mem: Optional[str] = None,
        job_start_timeout: Optional[int] = None,
        account: Optional[str] = None,
        qos: Optional[str] = None,
        out_of_cluster: bool = False,
        attach_to: Optional[str] = None,
        *,
        controller_host: str = "",
    ) -> None:
        if out_of_cluster or attach_to is not None:
            raise NotImplementedError(
                "SlurmJob: out_of_cluster / attach_to (Monarch's gateway through a worker) are "
                "not supported: the controller must reach the nodes' agents directly")
        if not isinstance(meshes, dict):
            raise TypeError(f"SlurmJob takes {{mesh name: number of nodes}}, got {meshes!r}")
        for name, count in meshes.items():
            _check_mesh(name, count)
        if isinstance(slurm_args, (str, bytes)):
            raise TypeError("SlurmJob: slurm_args is a list of sbatch arguments, not a string")
        for what, value, low in (("ntasks_per_node", ntasks_per_node, 1),
                                 ("monarch_port", monarch_port, 0)):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValueError(f"SlurmJob: {what} must be an int >= {low}, got {value!r}")
        if monarch_port > 65535:
            raise ValueError(f"SlurmJob: monarch_port must be a port number, got {monarch_port}")
        super().__init__()
        self._meshes = dict(meshes)
        self._python_exe = python_exe or ""
        self._slurm_args = [str(a) for a in slurm_args]
        self._port = monarch_port
        self._job_name = job_name
        self._ntasks_per_node = ntasks_per_node
        self._time_limit = time_limit
        self._partition = partition
        self._log_dir = os.path.abspath(log_dir if log_dir is not None else os.getcwd())
        self._exclusive = exclusive
        self._gpus_per_node = gpus_per_node
        self._cpus_per_task = cpus_per_task
        self._mem = mem
        self._start_timeout = float(job_start_timeout if job_start_timeout is not None
                                    else _DEFAULT_START_TIMEOUT_S)
        self._account = account
        self._qos = qos
        self._controller_host = controller_host
        self._job_id: Optional[str] = None
        self._dir: Optional[str] = None
        self._addresses: List[str] = []  # per task, once every agent reported

    def add_mesh(self, name: str, num_nodes: int) -> None:
        """Another mesh of ``num_nodes`` nodes (before ``apply``)."""
        if self.active:
            raise RuntimeError("SlurmJob.add_mesh: the job is already applied")
        _check_mesh(name, num_nodes)
        self._meshes[name] = num_nodes

    @property
    def job_id(self) -> Optional[str]:
        """SLURM's id of the applied job (None before ``apply``)."""
        return self._job_id

    @property
    def _secret_file(self) -> str:
        assert self._dir is not None
        return job_secret_file(self._dir)

    @property
    def _output(self) -> str:
        assert self._dir is not None
        return os.path.join(self._dir, "job.out")

    # -- JobTrait ------------------------------------------------------------------
    def _create(self, client_script: Optional[str]) -> None:
        if client_script is not None:
            raise NotImplementedError("SlurmJob: batch mode (apply(client_script=...)) is not "
                                      "supported; run the client where it reaches the nodes")
        if not self._meshes:
            raise ValueError("SlurmJob: no meshes (give some, or add_mesh before apply)")
        binary = build_binary("monarch-host")
        if not binary:
            raise RuntimeError("SlurmJob: no monarch-host binary in the build tree (build "
                               "target monarch-host)")
        os.makedirs(self._log_dir, exist_ok=True)
        self._dir = tempfile.mkdtemp(prefix=f"{self._job_name}-", dir=self._log_dir)
        try:
            write_job_secret(self._dir)
            script = os.path.join(self._dir, "job.sbatch")
            with open(script, "w") as f:
                f.write(self._batch_script(binary))
            out = _run(["sbatch", "--parsable", *self._slurm_args, script], "sbatch")
            self._job_id = out.strip().split(";")[0]
            if not self._job_id:
                raise RuntimeError(f"SlurmJob: sbatch printed no job id ({out!r})")
        except BaseException:
            self._kill()
            raise

    def _batch_script(self, binary: str) -> str:
        nodes = sum(self._meshes.values())
        lines = ["#!/bin/bash",
                 f"#SBATCH --job-name={self._job_name}",
                 f"#SBATCH --nodes={nodes}",
                 f"#SBATCH --ntasks-per-node={self._ntasks_per_node}",
                 f"#SBATCH --output={self._output}"]
        for flag, value in (("time", self._time_limit), ("partition", self._partition),
                            ("gpus-per-node", self._gpus_per_node),
                            ("cpus-per-task", self._cpus_per_task), ("mem", self._mem),
                            ("account", self._account), ("qos", self._qos)):
            if value is not None:
                lines.append(f"#SBATCH --{flag}={value}")
        if self._exclusive:
            lines.append("#SBATCH --exclusive")
        agent = [binary, "--listen", f"tcp://0.0.0.0:{self._port}",
                 "--secret-file", self._secret_file, "--name-from-slurm"]
        if self._controller_host:
            agent += ["--reachable-from", self._controller_host]
        tasks = nodes * self._ntasks_per_node
        srun = ["srun", f"--nodes={nodes}", f"--ntasks={tasks}",
                f"--ntasks-per-node={self._ntasks_per_node}", "--label",
                "--kill-on-bad-exit=1", *agent]
        lines.append("exec " + " ".join(shlex.quote(a) for a in srun))
        return "\n".join(lines) + "\n"

    def _state(self) -> JobState:
        if not self._addresses:
            self._addresses = self._wait_for_agents()
        elif _squeue_state(self._job_id) not in _LIVE_STATES:
            raise RuntimeError(f"SlurmJob: SLURM job {self._job_id} is no longer running")
        hosts: Dict[str, Any] = {}
        first = 0
        for mesh, count in self._meshes.items():
            n = count * self._ntasks_per_node
            hosts[mesh] = attach_hosts(self._addresses[first:first + n],
                                       secret_file=self._secret_file,
                                       python=self._python_exe)
            first += n
        return JobState(hosts)

    def _wait_for_agents(self) -> List[str]:
        """Every agent's HOST:PORT, by task, once all reported (bounded)."""
        tasks = sum(self._meshes.values()) * self._ntasks_per_node
        deadline = time.monotonic() + self._start_timeout
        found: Dict[int, str] = {}
        while True:
            # The state before the output: whatever a job wrote before it
            # ended is in what is read after.
            state = _squeue_state(self._job_id)
            text = _read(self._output)
            for m in _SERVING.finditer(text):
                found[int(m.group(1))] = m.group(2)
            if set(found) == set(range(tasks)):
                return [found[t] for t in range(tasks)]
            if state not in _LIVE_STATES:
                ended = f"ended ({state})" if state else "is gone"
                raise RuntimeError(f"SlurmJob: SLURM job {self._job_id} {ended} before its "
                                   f"agents reported ({len(found)} of {tasks}); its "
                                   f"output:\n{_tail(text)}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"SlurmJob: {len(found)} of {tasks} agents of SLURM job "
                                   f"{self._job_id} reported within {self._start_timeout:.0f} s "
                                   f"(job state {state}); its output:\n{_tail(text)}")
            time.sleep(_POLL_S)

    def can_run(self, spec: JobTrait) -> bool:
        return (isinstance(spec, SlurmJob) and spec._meshes == self._meshes
                and spec._ntasks_per_node == self._ntasks_per_node
                and self._job_id is not None
                and _squeue_state(self._job_id) in _LIVE_STATES)

    def _kill(self) -> None:
        if self._job_id is not None:
            try:
                _run(["scancel", self._job_id], "scancel")
            finally:
                deadline = time.monotonic() + _KILL_TIMEOUT_S
                while (_squeue_state(self._job_id) in _LIVE_STATES | {"COMPLETING"}
                       and time.monotonic() < deadline):
                    time.sleep(_POLL_S)
            self._job_id = None
        self._addresses = []
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None


def _check_mesh(name: Any, count: Any) -> None:
    if not isinstance(name, str) or not name:
        raise TypeError(f"SlurmJob: a mesh name is a non-empty str, got {name!r}")
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ValueError(f"SlurmJob: mesh '{name}' needs a positive number of nodes, "
                         f"got {count!r}")


def _run(argv: List[str], what: str) -> str:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=_COMMAND_TIMEOUT_S,
                              stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        raise RuntimeError(f"SlurmJob: no '{argv[0]}' on PATH: SLURM's command line tools "
                           "are needed (slurm-client)") from None
    except subprocess.TimeoutExpired:
        raise TimeoutError(f"SlurmJob: {what} did not answer within "
                           f"{_COMMAND_TIMEOUT_S:.0f} s") from None
    if done.returncode != 0:
        raise RuntimeError(f"SlurmJob: {what} failed (exit status {done.returncode}): "
                           f"{(done.stderr or done.stdout).strip()}")
    return done.stdout


def _squeue_state(job_id: Optional[str]) -> Optional[str]:
    """The job's state as squeue says it; None once SLURM no longer lists it."""
    if job_id is None:
        return None
    try:
        done = subprocess.run(["squeue", "-h", "-j", job_id, "-o", "%T"], capture_output=True,
                              text=True, timeout=_COMMAND_TIMEOUT_S, stdin=subprocess.DEVNULL)
    except (FileNotFoundError, subprocess.TimeoutExpired):
        return None
    state = done.stdout.strip().splitlines()
    return state[0].strip() if done.returncode == 0 and state else None


def _read(path: str) -> str:
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except FileNotFoundError:
        return ""


def _tail(text: str, lines: int = 20) -> str:
    return "\n".join(text.strip().splitlines()[-lines:]) or "(none)"
