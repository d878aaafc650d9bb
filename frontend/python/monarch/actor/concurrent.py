"""``from monarch.actor.concurrent import concurrent_endpoint``, as in Monarch
(see ``monarch._src.actor.endpoints`` for how it differs)."""

from __future__ import annotations

from .._src.actor.endpoints import concurrent_endpoint

__all__ = ["concurrent_endpoint"]
