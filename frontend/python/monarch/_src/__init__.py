"""monarch's implementation (private). The public faces -- ``monarch``,
``monarch.actor``, ``monarch.rdma`` -- only re-export from here.

Layers, imports one way (a test fails on any cycle)::

    common  <  mesh  <  backend  <  tensor
    common  <  mesh  <  actor           (actor never imports tensor or backend)
    common  <  actor <  rdma

``common`` (errors, futures, pickling, source locations) and ``mesh`` (mesh
views) import neither torch nor the tensor frontend: actor worker processes
import them without paying for torch. docs/python.md, "Package layout".
"""
