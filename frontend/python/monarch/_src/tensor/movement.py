"""Moving and inspecting distributed tensors (DESIGN.md §6.3): ``to_mesh``,
``slice_mesh``, ``fetch_shard`` / ``inspect`` / ``show``, and the rank
coordinates of a mesh (``mesh.rank(dims)``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Dict, Optional, Sequence, Union

import torch

from ..common.errors import usage
from ..common.location import user_location
from ..mesh.view import dim_names
from .checks import check_no_grad, check_use, local_value
from .core import Spec, TensorCore, contiguous, result_of, view_of
from .modes import internal
from .streams import get_active_stream
from .tracing import sink_for


@internal
def to_mesh(t: Any, dest: Any, loc: str) -> TensorCore:
    if not isinstance(t, TensorCore):
        raise usage("LOCAL_TENSOR", "to_mesh of a local tensor: create it on a mesh first")
    src = t._mesh
    if not hasattr(dest, "_view") or not hasattr(dest, "_session"):
        raise TypeError(f"to_mesh takes a ProcMesh (or a view of one), not "
                        f"{type(dest).__name__}")
    if dest._session is not src._session:
        raise usage(
            "WRONG_MESH",
            f"to_mesh between meshes of different spawn_procs ({src._describe()} -> "
            f"{dest._describe()})",
        )
    stream = get_active_stream()
    check_use(t, None, stream, "to_mesh")
    check_no_grad(t, "to_mesh")
    for d in src._view.dims:
        i = dest._view.find(d.name)
        if i is None:
            raise ValueError(
                f"to_mesh between incompatible meshes: source dim '{d.name}' is not in the "
                "destination"
            )
        if dest._view.dims[i].size != d.size:
            raise ValueError(
                f"to_mesh between incompatible meshes: source dim '{d.name}' has size "
                f"{d.size} but size {dest._view.dims[i].size} in the destination"
            )
    spec = t._spec
    result = result_of(Spec.get(spec.shape, spec.stride, 0, spec.dtype, spec.fake_device,
                                spec.device), dest, stream)
    sink_for(src._session).send(t, result, dest, stream, loc)
    return result


@internal
def slice_mesh(t: Any, coords: Dict[str, Any], loc: str) -> TensorCore:
    if not isinstance(t, TensorCore):
        raise usage("LOCAL_TENSOR", "slice_mesh of a local tensor")
    check_use(t, None, t._ref.stream, "slice_mesh")
    sub = t._mesh._derive("slice", coords)
    r = view_of(t, sub, t._ref)
    sink_for(sub._session).slice_mesh(t, r, coords, loc)
    return r


@internal
def fetch_shard(t: Any, coords: Optional[Dict[str, int]] = None, **kwargs: int) -> Any:
    """A future of one rank's value (on CPU); coordinates default to 0."""
    loc = user_location()
    if coords is not None and not isinstance(coords, Mapping):
        raise TypeError(f"fetch_shard takes coordinates as a dict or as keywords (gpu=1), got "
                        f"{type(coords).__name__}")
    coords = dict(coords or {})
    coords.update(kwargs)
    if not isinstance(t, TensorCore):
        raise usage("LOCAL_TENSOR", f"fetch_shard of {local_value(t)}: only distributed "
                    "tensors are fetched")
    check_use(t, None, t._ref.stream, "fetch_shard")
    view = t._mesh._view
    full: Dict[str, int] = {}
    for name, c in coords.items():
        i = view.lookup(name)
        size = view.dims[i].size
        if isinstance(c, bool) or not isinstance(c, int):
            raise TypeError(f"coordinate of '{name}' must be an int, got {type(c).__name__}")
        if c < 0 or c >= size:
            raise IndexError(f"coordinate {c} is out of range for dim '{name}' of size {size}")
        full[name] = c
    for d in view.dims:
        full.setdefault(d.name, 0)
    return sink_for(t._mesh._session).fetch(t, full, loc)


def inspect(t: Any, coords: Optional[Dict[str, int]] = None, **kwargs: int) -> Any:
    """fetch_shard(...).get(): one rank's value on the controller (a local
    tensor is a LOCAL_TENSOR misuse, as for fetch_shard)."""
    return fetch_shard(t, coords, **kwargs).get()


def show(t: Any, coords: Optional[Dict[str, int]] = None, **kwargs: int) -> None:
    print(inspect(t, coords, **kwargs))


@internal
def rank(mesh: Any, dims: Union[str, Sequence[str]]) -> TensorCore:
    loc = user_location()
    names = dim_names(dims, "rank")
    if not names:
        raise ValueError("rank needs at least one dimension")
    seen = set()
    for d in names:
        mesh._view.lookup(d)
        if d in seen:
            raise ValueError(f"dimension '{d}' named twice")
        seen.add(d)
    stream = get_active_stream()
    result = result_of(contiguous((), torch.int64, torch.device("cpu")), mesh, stream)
    sink_for(mesh._session).rank(mesh, names, result, stream, loc)
    return result
