"""torchrun-style SPMD scripts on actor meshes: ``from monarch.spmd import
SPMDActor`` (docs/python.md, "Monarch compatibility"). The public face of
``monarch._src.actor.spmd``."""

from __future__ import annotations

from .._src.actor.spmd import SPMDActor, setup_torch_elastic_env

__all__ = ["SPMDActor", "setup_torch_elastic_env"]
