"""How this machine starts a Python worker process (actor workers and Python
tensor workers, docs/python.md "How it is built").

The runtime's local launcher execs one path without arguments, so a Python
worker is started through a launcher script written once per process and
kind: it exports the worker's environment and execs
``python -u .../monarch/_src/bootstrap.py``. Across hosts the agents run
the command itself (:func:`worker_command`), not a script that exists only on
this machine.
"""

from __future__ import annotations

import atexit
import os
import shlex
import shutil
import sys
import tempfile
from typing import Dict, List, Sequence, Tuple

KINDS = ("actor", "tensor")


def package_root() -> str:
    """The directory holding the ``monarch`` package (sys.path entry)."""
    # .../monarch/_src/common/python_workers.py
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))))


def worker_command(kind: str, python: str = "",
                   pythonpath: Sequence[str] = ()) -> Tuple[str, List[str], Dict[str, str]]:
    """(executable, arguments, environment) of a Python worker: ``kind``
    "actor" (Python actors only) or "tensor" (the C++ TensorWorker plus Python
    actors and remote functions). ``python`` (default: this interpreter) runs
    the bootstrap of this process's monarch package, with this process's
    ``sys.path`` after ``pythonpath``."""
    if kind not in KINDS:
        raise ValueError(f"unknown worker kind {kind!r}")
    root = package_root()
    script = os.path.join(root, "monarch", "_src", "bootstrap.py")
    paths = list(pythonpath) + [p for p in sys.path if p]
    env = {
        "MONARCH_PYTHON_ROOT": root,
        "MONARCH_WORKER_KIND": kind,
        "MONARCH_PYTHON_PATH": os.pathsep.join(paths),
    }
    return python or sys.executable, ["-u", script], env


_launchers: Dict[str, str] = {}


def launcher_path(kind: str = "actor") -> str:
    """A launcher script for a local Python worker of ``kind`` (see the module
    docstring; ``$MONARCH_PYTHON_WORKER`` overrides the actor worker's). Its
    directory is removed when this process exits."""
    env = os.environ.get("MONARCH_PYTHON_WORKER") if kind == "actor" else None
    if env:
        return env
    if kind not in _launchers:
        # Inside the runtime's private directory, which goes on every exit
        # path (SIGTERM, SIGKILL, a worker's _exit), unlike an atexit hook.
        from monarch import _actors  # type: ignore[attr-defined]

        d = tempfile.mkdtemp(prefix="monarch-pyworker-", dir=_actors.private_dir())
        atexit.register(shutil.rmtree, d, True)  # the script is only exec'd
        path = os.path.join(d, f"monarch-python-{kind}-worker")
        exe, args, exports = worker_command(kind)
        with open(path, "w") as f:
            f.write("#!/bin/sh\n")
            for k, v in exports.items():
                f.write(f"{k}={shlex.quote(v)}; export {k}\n")
            f.write("exec " + " ".join(shlex.quote(a) for a in [exe] + args) + "\n")
        os.chmod(path, 0o700)
        _launchers[kind] = path
    return _launchers[kind]
