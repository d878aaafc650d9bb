"""``JobTrait``, ``JobState``, ``LocalJob`` and the job files (Monarch's
``monarch.job``; docs/python.md, "Jobs").

A job is a specification of host meshes by name. ``apply()`` brings it into
existence (once), ``state()`` gives its :class:`JobState` -- the host meshes
by name -- and ``kill()`` ends it. A job pickles: ``dump(path)`` writes it to
a job file, ``job_load(path)`` reads it back, in this process or another, and
``state(cached_path)`` reuses a running job saved there when it can run this
specification (``can_run``), else applies this one and saves it.
"""

from __future__ import annotations

import importlib
import logging
import os
import pickle
import secrets
import uuid
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, Dict, NamedTuple, Optional, Sequence, Union

from ..actor.host_mesh import HostMesh, this_host

logger = logging.getLogger(__name__)

#: Where ``state()`` caches the running job (relative to the working directory).
DEFAULT_JOB_PATH: str = ".monarch/job_state.pkl"
_MONARCH_DIR = ".monarch"
_STATE_FILE = "state.pkl"
_SPEC_FILE = "spec"


def job_secret_file(directory: str) -> str:
    """Where a job whose hosts are ``monarch-host`` agents keeps its secret
    (the agents' ``--secret-file``): in the job's own 0700 directory."""
    return os.path.join(directory, "job.secret")


def write_job_secret(directory: str) -> str:
    """A new job secret (32 random bytes, hex) at ``job_secret_file``, mode
    0600 and never over an existing file; returns its path."""
    path = job_secret_file(directory)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(secrets.token_hex(32) + "\n")
    return path


class JobState:
    """The host meshes of a running job, by name: ``state.trainers``."""

    def __init__(self, hosts: Dict[str, HostMesh]):
        self._hosts = dict(hosts)

    def __getattr__(self, name: str) -> HostMesh:
        hosts = self.__dict__.get("_hosts", {})
        if name in hosts:
            return hosts[name]
        raise AttributeError(f"'{name}' is not a host mesh of this job; its host meshes are: "
                             f"{', '.join(sorted(hosts)) or '(none)'}")

    def __repr__(self) -> str:
        return f"JobState(hosts={self._hosts!r})"


class CachedRunning(NamedTuple):
    """The status of a job that runs as another, loaded from a job file."""

    job: "JobTrait"


Status = Union[str, CachedRunning]


class JobTrait(ABC):
    """A job: a specification of host meshes, and its state once applied.

    Subclasses implement ``_create`` (start the job's hosts), ``_state``
    (their host meshes), ``can_run`` (whether this running job serves
    another specification) and ``_kill``; ``apply``, ``state``, ``kill``
    and the job files are common."""

    def __init__(self) -> None:
        self._status: Status = "not_running"
        self._apply_id: Optional[str] = None

    # -- status ----------------------------------------------------------------
    @property
    def _running(self) -> "Optional[JobTrait]":
        status = self._status
        if isinstance(status, CachedRunning):
            return status.job
        return self if status == "running" else None

    @property
    def active(self) -> bool:
        return self._running is not None

    @property
    def apply_id(self) -> Optional[str]:
        """A UUID of the current allocation (None before ``apply``)."""
        running = self._running
        return running._apply_id if running is not None else None

    def apply(self, client_script: Optional[str] = None) -> None:
        """Brings the job into existence; a no-op if it already runs."""
        if self._running is None:
            self._create(client_script)
            self._apply_id = str(uuid.uuid4())
            self._status = "running"

    # -- state -----------------------------------------------------------------
    def state(self, cached_path: Optional[str] = DEFAULT_JOB_PATH) -> JobState:
        """The job's host meshes. A job not yet running reuses the running job
        saved at ``cached_path`` when that one can run this specification;
        otherwise it is applied and saved there (None: no job file)."""
        running = self._running
        if running is not None:
            return running._state()
        cached = self._load_cached(cached_path)
        if cached is not None:
            self._status = CachedRunning(cached)
            return cached._state()
        self.apply()
        state = self._state()
        if cached_path is not None:
            self.dump(cached_path)
        return state

    def _load_cached(self, cached_path: Optional[str]) -> "Optional[JobTrait]":
        if cached_path is None:
            return None
        try:
            job = job_load(cached_path)
        except FileNotFoundError:
            return None
        running = job._running
        if running is None:
            return None
        if not running.can_run(self):
            logger.info("the job saved at %s cannot run this job: it is ended", cached_path)
            try:
                running._kill()
            except NotImplementedError:
                pass
            target = os.path.realpath(cached_path)
            try:
                os.remove(target)
            except FileNotFoundError:
                pass
            return None
        return running

    # -- files -----------------------------------------------------------------
    def dump(self, filename: str) -> None:
        """Writes the job to ``filename`` (through a symlink to its target),
        making its directory."""
        path = os.path.realpath(filename) if os.path.islink(filename) else filename
        directory = os.path.dirname(os.path.abspath(path))
        os.makedirs(directory, exist_ok=True)
        with open(path, "wb") as f:
            pickle.dump(self, f)

    def dumps(self) -> bytes:
        return pickle.dumps(self)

    def kill(self) -> None:
        """Ends the job (its hosts and what runs on them)."""
        running = self._running
        if running is not None:
            running._kill()
        self._status = "not_running"

    # -- what a kind of job implements ---------------------------------------------
    @abstractmethod
    def _state(self) -> JobState: ...

    @abstractmethod
    def _create(self, client_script: Optional[str]) -> None: ...

    @abstractmethod
    def can_run(self, spec: "JobTrait") -> bool: ...

    @abstractmethod
    def _kill(self) -> None: ...


class LocalJob(JobTrait):
    """A job on this machine: each host mesh it names is ``this_host()``, so a
    program switches between a remote job and a local one by configuration."""

    def __init__(self, hosts: Sequence[str] = ("hosts",)):
        if isinstance(hosts, str) or not all(isinstance(h, str) and h for h in hosts):
            raise TypeError(f"LocalJob takes the names of its host meshes (a sequence of "
                            f"str), got {hosts!r}")
        super().__init__()
        self._host_names = tuple(hosts)

    def _state(self) -> JobState:
        return JobState({name: this_host() for name in self._host_names})

    def _create(self, client_script: Optional[str]) -> None:
        if client_script is not None:
            raise NotImplementedError(
                "LocalJob.apply(client_script=...): running the client script as a batch "
                "daemon is not supported here; run the script itself (docs/python.md, \"Jobs\")")

    def can_run(self, spec: JobTrait) -> bool:
        # A local job always exists: the specification at hand is used.
        return False

    def _kill(self) -> None:
        pass


def job_loads(data: bytes) -> JobTrait:
    """A job from ``JobTrait.dumps()``."""
    job = pickle.loads(data)
    if not isinstance(job, JobTrait):
        raise TypeError(f"job_loads: the data hold a {type(job).__name__}, not a job")
    return job


def job_load(filename: str = DEFAULT_JOB_PATH) -> JobTrait:
    """A job from a job file (``JobTrait.dump``)."""
    with open(filename, "rb") as f:
        return job_loads(f.read())


def _spec_file() -> Path:
    """The spec file of the current context: next to the state file that
    ``.monarch/job_state.pkl`` links to (``default`` without the link)."""
    link = Path(DEFAULT_JOB_PATH)
    if link.is_symlink():
        return Path(_MONARCH_DIR) / Path(os.readlink(link)).parent / _SPEC_FILE
    return Path(_MONARCH_DIR) / "default" / _SPEC_FILE


def set_current_job(module_path: str) -> None:
    """Makes the job at ``module_path`` (``"pkg.module.job"``, a ``JobTrait``
    attribute of a module) the current context's job: written to
    ``.monarch/<context>/spec``; ``.monarch/job_state.pkl`` becomes a link to
    the context's ``state.pkl`` (``default`` the first time)."""
    if not isinstance(module_path, str) or "." not in module_path:
        raise ValueError(f"set_current_job takes 'module.attr', got {module_path!r}")
    link = Path(DEFAULT_JOB_PATH)
    Path(_MONARCH_DIR).mkdir(parents=True, exist_ok=True)
    if not link.is_symlink():
        default = Path(_MONARCH_DIR) / "default"
        default.mkdir(parents=True, exist_ok=True)
        if link.exists():  # a job file of its own: it becomes the default context's
            link.rename(default / _STATE_FILE)
        link.symlink_to(Path("default") / _STATE_FILE)
    spec = _spec_file()
    spec.parent.mkdir(parents=True, exist_ok=True)
    spec.write_text(module_path)


def load_current_job() -> JobTrait:
    """A fresh job object of the current context's spec (``set_current_job``):
    the module is imported and its attribute returned; ``state()`` on it
    connects (reusing the running job saved in the context when it can)."""
    spec = _spec_file()
    try:
        module_path = spec.read_text().strip()
    except FileNotFoundError:
        raise FileNotFoundError(f"no job spec at {spec}: call set_current_job('module.attr') "
                                "first") from None
    if "." not in module_path:
        raise ValueError(f"the job spec at {spec} must be 'module.attr', got {module_path!r}")
    module_name, attr = module_path.rsplit(".", 1)
    module = importlib.import_module(module_name)
    job: Any = getattr(module, attr, None)
    if job is None:
        raise AttributeError(f"module '{module_name}' has no '{attr}' attribute (the job spec "
                             f"at {spec})")
    if not isinstance(job, JobTrait):
        raise TypeError(f"'{module_path}' must be a JobTrait, got {type(job).__name__}")
    return job
