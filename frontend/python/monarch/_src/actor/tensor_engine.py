"""The tensor engine as the actor layer sees it.

Proc meshes start tensor workers and ``activate()`` distributed tensors; the
``rref`` adverb returns distributed tensors. Those live in
``monarch._src.tensor``, which imports torch and sits above this layer, so
the actor layer reaches it as a plug-in found by module name at the first
such call -- never by an import statement (actor worker processes that host
only actors never import torch; the package's import graph stays acyclic).
The engine module provides ``start_session``, ``activate``, ``rank`` and
``rref`` (see ``monarch/_src/tensor/engine.py``).
"""

from __future__ import annotations

import importlib
from typing import Any

ENGINE_MODULE = "monarch._src.tensor.engine"


_engine: Any = None


def engine() -> Any:
    global _engine
    if _engine is None:  # once: mesh.activate() asks for it at every call
        _engine = importlib.import_module(ENGINE_MODULE)
    return _engine
