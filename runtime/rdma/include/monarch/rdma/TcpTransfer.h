//===- TcpTransfer.h - RDMA reads and writes over the transport -*- C++ -*-===//
//
// The fallback when no RDMA NIC is usable: an operation is cut into chunks,
// each one request to the owner's RDMA service. A read's reply carries the
// chunk as a raw payload frame sent straight from the owner's memory; a
// write's request carries it the same way from the writer's memory. Chunks
// go out together, spread over the configured lanes (connections); the
// receiver copies each arriving chunk into place on the actor arena so the io
// thread keeps reading the socket.
//
//===----------------------------------------------------------------------===//
#ifndef MONARCH_RDMA_TCPTRANSFER_H
#define MONARCH_RDMA_TCPTRANSFER_H

#include "monarch/rdma/BufferTable.h"
#include "monarch/rdma/PeerChannel.h"
#include "monarch/rdma/RdmaOp.h"

namespace monarch::rdma {

/// Owner side: serves "read" and "write" of the buffers in `table`.
void serveTcpTransfers(PeerChannel &channel,
                       std::shared_ptr<BufferTable> table);

/// Requester side: runs `op` (already validated) as chunked requests; adds
/// its parts to `tracker`.
void startTcpTransfer(PeerChannel &channel, const RdmaOp &op,
                      const std::shared_ptr<OpTracker> &tracker,
                      const RdmaOptions &options,
                      std::chrono::steady_clock::time_point deadline);

/// The error of a transfer on a buffer the owner no longer has.
Status droppedBufferError(uint64_t id, const std::string &owner);

} // namespace monarch::rdma

#endif // MONARCH_RDMA_TCPTRANSFER_H
