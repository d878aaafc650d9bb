"""The controller-side rules of distributed tensors (DESIGN.md §6.4, the
misuse table of docs/python.md): checked before anything is sent, raised
as ``MonarchUsageError`` at the call site."""

from __future__ import annotations

from typing import Any

import torch

from ..common.errors import usage
from .core import TensorCore


def check_use(t: TensorCore, mesh: Any, stream: Any, what: str) -> None:
    """Borrow state, mesh (None: any) and stream of an input."""
    ref = t._ref
    lending = ref.lending
    if lending is not None:
        if lending.borrow is not None and lending.borrow.dropped:
            raise usage(
                "DROPPED",
                f"{what} uses a borrowed tensor after its borrow was dropped at "
                f"{lending.borrow.dropped_at}",
            )
        if lending.mut_borrow is not None:
            raise usage(
                "BORROWED",
                f"{what} uses a tensor that is mutably borrowed onto stream "
                f"{lending.mut_borrow._stream.name!r} (borrowed at "
                f"{lending.mut_borrow.location}); drop the borrow first",
            )
    if mesh is not None and t._mesh is not mesh and not t._mesh._same_mesh(mesh):
        raise usage(
            "WRONG_MESH",
            f"{what} uses a tensor on mesh {t._mesh._describe()} while running on mesh "
            f"{mesh._describe()}; move it with to_mesh",
        )
    if ref.stream is not stream:
        raise usage(
            "WRONG_STREAM",
            f"{what} uses a tensor owned by stream {ref.stream.name!r} on stream "
            f"{stream.name!r}; borrow it onto the stream first",
        )


def check_mutate(t: TensorCore, what: str) -> None:
    lending = t._ref.lending
    if lending is None:
        return
    live = [b for b in lending.ro_borrows if not b.dropped]
    if live:
        raise usage(
            "MUTATING_BORROW",
            f"{what} would mutate a tensor while it is borrowed read-only onto stream "
            f"{live[0]._stream.name!r} (borrowed at {live[0].location})",
        )
    if lending.borrow is not None and not lending.borrow.mutable:
        raise usage(
            "MUTATING_BORROW",
            f"{what} would mutate a read-only borrow (borrowed at "
            f"{lending.borrow.location}); borrow it with mutable=True",
        )


def local_value(x: Any) -> str:
    """What a non-distributed argument is, for LOCAL_TENSOR messages: "a
    local tensor", else its type ("an int")."""
    if isinstance(x, torch.Tensor):
        return "a local tensor"
    name = type(x).__name__
    return f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name}"


def check_no_grad(t: TensorCore, what: str) -> None:
    if t.requires_grad and torch.is_grad_enabled():
        raise usage(
            "REQUIRES_GRAD",
            f"{what} of a tensor that requires grad is not differentiable; use "
            "t.detach() or torch.no_grad()",
        )
