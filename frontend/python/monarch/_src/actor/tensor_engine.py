"""The tensor engine as the actor layer sees it.

Proc meshes start tensor workers and ``activate()`` distributed tensors; the
``rref`` adverb returns distributed tensors. Those live in
``monarch._src.tensor``, which imports torch and sits above this layer, so
the actor layer reaches it as a plug-in found by module name at the first
such call -- never by an import statement (actor worker processes that host
only actors never import torch; the package's import graph stays acyclic).
The engine module provides ``start_session``, ``activate``, ``rank``,
``rref``, ``local_shards`` and ``local_values`` (see
``monarch/_src/tensor/engine.py``).
"""

from __future__ import annotations

import importlib
import sys
from typing import Any, Sequence

from ..common.pickling import loads

ENGINE_MODULE = "monarch._src.tensor.engine"


_engine: Any = None


def engine() -> Any:
    global _engine
    if _engine is None:  # once: mesh.activate() asks for it at every call
        _engine = importlib.import_module(ENGINE_MODULE)
    return _engine


def loads_local(frames: Sequence[Any]) -> Any:
    """``pickling.loads`` of a reply or port message, its tensors made local
    ones even when it is unpickled inside ``mesh.activate()`` (whose capture
    would take the torch calls that rebuild them for the mesh's): the
    engine's ``local_values``, once the engine is loaded (before, no mesh
    can be active)."""
    if ENGINE_MODULE in sys.modules:
        with engine().local_values():
            return loads(frames)
    return loads(frames)
