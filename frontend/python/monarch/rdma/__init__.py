"""One-sided reads and writes of registered memory (docs/rdma.md):
``from monarch.rdma import RDMABuffer``. The public face of
``monarch._src.rdma``."""

from __future__ import annotations

from .._src.rdma.buffer import (RDMABuffer, RDMAError, backend, get_rdma_backend,
                                is_ibverbs_available, is_rdma_available, submit)

__all__ = ["RDMABuffer", "RDMAError", "backend", "get_rdma_backend", "is_ibverbs_available",
           "is_rdma_available", "submit"]
