"""Borrows (DESIGN.md §6.4): ``stream.borrow(t, mutable=False)`` gives
``(t2, borrow)``, ``t``'s value usable on another stream until
``borrow.drop()``. Read-only: both streams may read, neither may write.
Mutable: the origin loses all access until the drop. On the workers the
receiving stream waits for the value's creation, the origin for the
borrow's last use."""

from __future__ import annotations

from typing import Any, Optional, Tuple

from ..common.errors import usage
from ..common.location import user_location
from .checks import check_use, local_value
from .core import Ref, TensorCore, view_of
from .modes import internal
from .tracing import sink_for


class Borrow:
    """A borrow of a tensor onto another stream; ends with :meth:`drop`."""

    def __init__(self, session: Any, id: int, origin_ref: Any, result_ref: Any, mutable: bool,
                 origin_mesh: Any, origin_stream: Any, stream: Any, location: str):
        self._session = session
        self.id = id
        self._origin_ref = origin_ref
        self._result_ref = result_ref
        self.mutable = mutable
        self._origin_mesh = origin_mesh
        self._origin_stream = origin_stream
        self._stream = stream
        self.location = location
        self.dropped_at: Optional[str] = None

    @property
    def dropped(self) -> bool:
        return self.dropped_at is not None

    def drop(self) -> None:
        if self.dropped:
            return
        drop_borrow(self, user_location())

    def __enter__(self) -> "Borrow":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.drop()

    def __repr__(self) -> str:
        state = f"dropped at {self.dropped_at}" if self.dropped else "live"
        kind = "mutable" if self.mutable else "read-only"
        return f"<monarch.Borrow {self.id} {kind} onto {self._stream.name!r}, {state}>"


@internal
def borrow(stream: Any, t: Any, mutable: bool) -> Tuple[TensorCore, "Borrow"]:
    loc = user_location()
    if not isinstance(t, TensorCore):
        raise usage("LOCAL_TENSOR", f"borrow of {local_value(t)}: only distributed tensors "
                    "are borrowed")
    origin = t._ref.stream
    check_use(t, None, origin, "borrow")
    if t.requires_grad:
        raise usage(
            "REQUIRES_GRAD",
            "borrow of a tensor that requires grad: borrow t.detach() or a gradient instead",
        )
    if origin is stream:
        raise usage("WRONG_STREAM", f"borrow onto stream {stream.name!r}, which already owns it")
    lending = t._ref.lend()
    if mutable and any(not b.dropped for b in lending.ro_borrows):
        b = next(b for b in lending.ro_borrows if not b.dropped)
        raise usage(
            "MUTATING_BORROW",
            f"mutable borrow of a tensor that is borrowed read-only (at {b.location})",
        )
    if lending.borrow is not None and not lending.borrow.mutable and mutable:
        raise usage("MUTATING_BORROW", "mutable borrow of a read-only borrow")
    session = t._mesh._session
    rref = Ref(session, t._mesh, stream, owns=False)
    r = view_of(t, t._mesh, rref)
    b = Borrow(session, session.new_borrow(), t._ref, rref, mutable, t._mesh, origin, stream, loc)
    rref.lend().borrow = b
    if mutable:
        lending.mut_borrow = b
    else:
        lending.ro_borrows.append(b)
    sink_for(session).borrow(t, r, b, loc)
    return r, b


@internal
def drop_borrow(b: "Borrow", loc: str) -> None:
    origin: Ref = b._origin_ref
    lending = origin.lend()
    if lending.mut_borrow is b:
        lending.mut_borrow = None
    if b in lending.ro_borrows:
        lending.ro_borrows.remove(b)
    b.dropped_at = loc or "<unknown>"
    sink_for(b._session).drop(b, loc)
