"""``monarch.get_active_mesh()`` and ``monarch.no_mesh``, as in Monarch: the
mesh of the innermost ``mesh.activate()``, and a way out of it.

Inside ``with no_mesh.activate():`` torch calls are ordinary local ones,
``get_active_mesh()`` raises and ``monarch.remote`` functions without
distributed arguments run locally; a ``mesh.activate()`` inside it captures
again.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator

from . import modes

__all__ = ["get_active_mesh", "no_mesh"]


def get_active_mesh() -> Any:
    """The ProcMesh of the innermost ``mesh.activate()``; ValueError if none."""
    mesh = modes.active_mesh()
    if mesh is None:
        raise ValueError("no device mesh is active (use `with mesh.activate():`)")
    return mesh


class _NoMesh:
    """``with no_mesh.activate():`` -- no mesh is active inside."""

    @contextlib.contextmanager
    def activate(self) -> Iterator[None]:
        t = modes._thread
        with modes.local():
            # A mesh.activate() inside must find the modes as if none were
            # entered, and put them back as they were.
            saved = (modes.capture, t.direct_dispatch, t.local_depth, t.in_handler)
            modes.capture = None
            t.direct_dispatch = None
            t.local_depth = t.in_handler = 0
            modes.push_mesh(None)
            try:
                yield None
            finally:
                modes.pop_mesh()
                (modes.capture, t.direct_dispatch, t.local_depth, t.in_handler) = saved

    def __repr__(self) -> str:
        return "monarch.no_mesh"


no_mesh = _NoMesh()
