//===- RdmaBuffer.cpp - Owner RAII and the process-wide transfer calls ---===//
#include "monarch/rdma/RdmaBuffer.h"

namespace monarch::rdma {

Expected<RdmaBuffer> RdmaBuffer::create(void *data, size_t size, bool writable,
                                        std::shared_ptr<void> keepAlive) {
  auto engine = RdmaEngine::forProcess();
  if (!engine.ok())
    return engine.status();
  return create(std::move(*engine), data, size, writable, std::move(keepAlive));
}

Expected<RdmaBuffer> RdmaBuffer::create(std::shared_ptr<RdmaEngine> engine,
                                        void *data, size_t size, bool writable,
                                        std::shared_ptr<void> keepAlive,
                                        std::shared_ptr<StagedMemory> staged) {
  auto handle = engine->registerBuffer(data, size, writable,
                                       std::move(keepAlive), std::move(staged));
  if (!handle.ok())
    return handle.status();
  return RdmaBuffer(std::move(engine), std::move(*handle));
}

RdmaBuffer &RdmaBuffer::operator=(RdmaBuffer &&other) {
  if (this != &other) {
    (void)drop();
    engine = std::move(other.engine);
    h = std::move(other.h);
  }
  return *this;
}

RdmaBuffer::~RdmaBuffer() { (void)drop(); }

Status RdmaBuffer::drop() {
  if (!engine)
    return Status(ErrorCode::Invalid, h.describe() + " was already dropped");
  Status s = engine->dropBuffer(h.bufferId);
  engine.reset();
  return s;
}

namespace {
Future<Unit> run(RdmaOp op) {
  auto engine = RdmaEngine::forProcess();
  if (!engine.ok())
    return Future<Unit>::failed(engine.status());
  std::vector<RdmaOp> ops;
  ops.push_back(std::move(op));
  return (*engine)->submit(std::move(ops));
}
} // namespace

Future<Unit> readInto(const RdmaHandle &src, void *dst, size_t length,
                      uint64_t offset) {
  RdmaOp op;
  op.kind = RdmaOp::Kind::Read;
  op.remote = src;
  op.remoteOffset = offset;
  op.local = dst;
  op.length = length;
  return run(std::move(op));
}

Future<Unit> writeFrom(const RdmaHandle &dst, const void *src, size_t length,
                       uint64_t offset) {
  RdmaOp op;
  op.kind = RdmaOp::Kind::Write;
  op.remote = dst;
  op.remoteOffset = offset;
  op.local = const_cast<void *>(src);
  op.length = length;
  return run(std::move(op));
}

Future<Unit> submit(std::vector<RdmaOp> ops) {
  auto engine = RdmaEngine::forProcess();
  if (!engine.ok())
    return Future<Unit>::failed(engine.status());
  return (*engine)->submit(std::move(ops));
}

} // namespace monarch::rdma
