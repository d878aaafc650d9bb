//===- RdmaEngine.h - A proc's RDMA service and transfer engine -*- C++ -*-===//
//
// One per runtime (per proc). As owner it keeps the registered buffers and
// serves reads and writes of them (the TCP fallback) and verbs connection
// requests; as requester it runs operations on remote buffers: through the
// NIC when both ends registered with one, else over the runtime's transport.
// Operations on this proc's own buffers are plain copies.
//
// forProcess() gives the engine of Runtime::ofProcess() with the backend the
// environment selects (BackendSelection.h); tests build engines directly.
//
//===----------------------------------------------------------------------===//
#ifndef MONARCH_RDMA_RDMAENGINE_H
#define MONARCH_RDMA_RDMAENGINE_H

#include "monarch/rdma/BackendSelection.h"
#include "monarch/rdma/BufferTable.h"
#include "monarch/rdma/PeerChannel.h"
#include "monarch/rdma/RdmaOp.h"
#include "monarch/rdma/VerbsTransport.h"

namespace monarch::rdma {

class RdmaEngine {
public:
  /// `device` null: TCP fallback only.
  RdmaEngine(Runtime &rt, std::unique_ptr<VerbsDevice> device,
             RdmaOptions options = {});
  ~RdmaEngine();
  RdmaEngine(const RdmaEngine &) = delete;
  RdmaEngine &operator=(const RdmaEngine &) = delete;

  /// The engine of this process, made on first use (warns once when it
  /// falls back to TCP); an error when MONARCH_RDMA_BACKEND=none or invalid.
  static Expected<std::shared_ptr<RdmaEngine>> forProcess();
  /// The backend forProcess() uses (or would use) here.
  static BackendKind processBackend();

  BackendKind backend() const {
    return verbsPath ? BackendKind::Ibverbs : BackendKind::Tcp;
  }
  const RdmaOptions &options() const { return opts; }

  /// Owner side. `data` must stay valid until drop() and until transfers in
  /// flight finish; `keepAlive` (optional) is held that long instead.
  /// With `staged`, `data` is the host copy of memory only the owner can
  /// reach (StagedMemory.h): served over TCP only, never registered with
  /// a NIC.
  Expected<RdmaHandle> registerBuffer(void *data, size_t size, bool writable,
                                      std::shared_ptr<void> keepAlive = {},
                                      std::shared_ptr<StagedMemory> staged = {});
  /// Later transfers on the buffer fail with a "dropped" error.
  Status dropBuffer(uint64_t id);
  size_t bufferCount() const { return table->size(); }
  /// Asks the owner of `handle` (any proc) to drop it.
  Future<Unit> dropRemote(const RdmaHandle &handle);

  /// Runs the operations together; the future completes when all are done,
  /// or with the first error. Bad operations fail before anything moves.
  Future<Unit> submit(std::vector<RdmaOp> ops);

  VerbsTransport *verbs() { return verbsPath.get(); }
  Runtime &runtime() { return rt; }

private:
  Status validate(const RdmaOp &op) const;
  void runLocal(const RdmaOp &op, const std::shared_ptr<OpTracker> &tracker);

  Runtime &rt;
  RdmaOptions opts;
  std::shared_ptr<BufferTable> table;
  std::shared_ptr<PeerChannel> channel;
  std::shared_ptr<VerbsTransport> verbsPath;
};

} // namespace monarch::rdma

#endif // MONARCH_RDMA_RDMAENGINE_H
