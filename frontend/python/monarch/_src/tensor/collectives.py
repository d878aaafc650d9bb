"""Collectives named by mesh dimension: ``t.reduce(dims, reduction, scatter)``
(DESIGN.md §6.2, docs/python.md "Collectives").

| reduction | scatter | collective | result shape |
|---|---|---|---|
| sum/avg/min/max/product | no | all-reduce | unchanged |
| sum/avg/min/max/product | yes | reduce-scatter | ``shape[1:]`` |
| stack | no | all-gather | ``[N, *shape]`` |
| stack | yes | all-to-all | unchanged |

The rules are checked here, at the call, before anything is sent; the
dialect's verifier checks the same ones on traced IR.
"""

from __future__ import annotations

from typing import Any, List, Optional, Sequence, Tuple, Union

import torch
from torch.utils._pytree import tree_map

from ..common.errors import usage
from ..common.location import user_location
from ..mesh.view import dim_names
from .checks import check_mutate, check_no_grad, check_use
from .core import TensorCore, contiguous, result_of
from .modes import internal
from .streams import get_active_stream
from .tracing import sink_for

REDUCTIONS = ("sum", "avg", "min", "max", "product", "stack")


def normalize_dims(view: Any, dims: Union[str, Sequence[str]]) -> Tuple[Tuple[str, ...], List[str]]:
    given = dim_names(dims, "reduce")
    for d in given:
        if not isinstance(d, str):
            raise TypeError(f"reduce dims must be names (str), got {type(d).__name__}")
    seen = set()
    for d in given:
        view.lookup(d)
        if d in seen:
            raise ValueError(f"dimension '{d}' named twice")
        seen.add(d)
    resolved = list(given) if given else list(view.names)
    return given, resolved


@internal
def reduce_tensor(
    t: Any,
    dims: Union[str, Sequence[str]],
    reduction: str,
    scatter: bool,
    inplace: bool,
    out: Optional[TensorCore],
    loc: str,
) -> TensorCore:
    what = "reduce_" if inplace else "reduce"
    if not isinstance(t, TensorCore):
        raise usage("LOCAL_TENSOR", f"{what} of a local tensor: only distributed tensors reduce")
    mesh = t._mesh
    stream = get_active_stream()
    check_use(t, None, stream, what)
    check_no_grad(t, what)
    if reduction not in REDUCTIONS:
        raise ValueError(
            f"unknown reduction '{reduction}' (one of {', '.join(REDUCTIONS)})"
        )
    view = mesh._view
    given, resolved = normalize_dims(view, dims)
    n = view.size(resolved)
    stack = reduction == "stack"
    if (stack or scatter) and len(resolved) > 1:
        raise ValueError(
            f"{'stack' if stack else 'scatter'} reduces over one dimension, got "
            f"{len(resolved)} ({', '.join(resolved)})"
        )
    if inplace and scatter:
        raise ValueError("reduce_ (in place) cannot scatter")
    if inplace and stack:
        raise ValueError("reduce_ (in place) cannot stack: the shape changes")
    if inplace and out is not None:
        raise ValueError("reduce_ (in place) cannot take out=")
    shape = list(t.shape)
    if scatter and not stack:
        if not shape or shape[0] != n:
            raise ValueError(
                f"reduce with scatter needs the leading size to equal the {n} ranks reduced "
                f"over, got shape {tuple(shape)}"
            )
        new_shape = shape[1:]
    elif scatter and stack:
        if not shape or shape[0] % n != 0:
            raise ValueError(
                f"stack with scatter needs the leading size to be a multiple of {n}, got "
                f"shape {tuple(shape)}"
            )
        new_shape = shape
    elif stack:
        new_shape = [n] + shape
    else:
        new_shape = shape
    if inplace:
        check_mutate(t, what)
        result = t
    elif out is not None:
        if not isinstance(out, TensorCore):
            raise usage("LOCAL_TENSOR", "reduce out= must be a distributed tensor")
        check_use(out, mesh, stream, what)
        check_mutate(out, what)
        if list(out.shape) != new_shape or out.dtype != t.dtype:
            raise ValueError(
                f"reduce out= has shape {tuple(out.shape)} and dtype {out.dtype}, the result "
                f"has shape {tuple(new_shape)} and dtype {t.dtype}"
            )
        result = out
    else:
        spec = t._spec
        result = result_of(contiguous(tuple(new_shape), t.dtype, spec.fake_device, spec.device),
                           mesh, stream)
    sink_for(mesh._session).reduce(t, result, given, reduction, scatter, inplace, out, stream, loc)
    return result


def reduce(
    tensors: Any,
    dims: Union[str, Sequence[str]] = (),
    reduction: str = "sum",
    scatter: bool = False,
    mesh: Any = None,
    _inplace: bool = False,
) -> Any:
    """``t.reduce(...)`` over every distributed tensor of a pytree."""
    loc = user_location()

    def one(x: Any) -> Any:
        if isinstance(x, torch.Tensor):
            return reduce_tensor(x, dims, reduction, scatter, _inplace, None, loc)
        return x

    return tree_map(one, tensors)


def reduce_(tensors: Any, dims: Union[str, Sequence[str]] = (), reduction: str = "sum",
            scatter: bool = False, mesh: Any = None) -> Any:
    return reduce(tensors, dims, reduction, scatter, mesh, _inplace=True)
