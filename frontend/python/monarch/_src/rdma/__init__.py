"""RDMA buffers: one-sided reads and writes of registered memory (docs/rdma.md)."""
