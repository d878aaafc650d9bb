"""The plan protobuf module (``runtime/tensor/proto/plan.proto``).

The build generates ``monarch/plan_pb2.py`` with protoc into
``build/python/monarch``. Running from the source tree instead, the module is
generated once into a cache directory with the ``protoc`` on PATH.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import subprocess
import tempfile
from types import ModuleType


def _load() -> ModuleType:
    try:
        from monarch import plan_pb2  # type: ignore[attr-defined]

        return plan_pb2
    except ImportError:
        pass
    here = os.path.dirname(os.path.abspath(__file__))
    proto_dir = None
    d = here
    for _ in range(6):
        candidate = os.path.join(d, "runtime", "tensor", "proto")
        if os.path.exists(os.path.join(candidate, "plan.proto")):
            proto_dir = candidate
            break
        d = os.path.dirname(d)
    protoc = shutil.which("protoc")
    if proto_dir is None or protoc is None:
        raise ImportError(
            "monarch.plan_pb2 is missing: build the frontend (cmake target "
            "monarch-python) or put protoc on PATH"
        )
    with open(os.path.join(proto_dir, "plan.proto"), "rb") as f:
        digest = hashlib.sha1(f.read()).hexdigest()[:12]
    cache = os.path.join(tempfile.gettempdir(), f"monarch-plan-{os.getuid()}-{digest}")
    target = os.path.join(cache, "plan_pb2.py")
    if not os.path.exists(target):
        os.makedirs(cache, exist_ok=True)
        subprocess.run(
            [protoc, f"--python_out={cache}", f"-I{proto_dir}", "plan.proto"],
            check=True,
        )
    spec = importlib.util.spec_from_file_location("monarch.plan_pb2", target)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


plan = _load()
