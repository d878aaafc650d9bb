//===- RdmaEngine.cpp - Owner service and operation dispatch -------------===//
#include "monarch/rdma/RdmaEngine.h"

#include "WireValues.h"

#include "monarch/rdma/IbVerbs.h"
#include "monarch/rdma/TcpTransfer.h"
#include "monarch/runtime/proc/Runtime.h"
#include "monarch/runtime/util/Log.h"

#include <cstdlib>
#include <cstring>
#include <map>

namespace monarch::rdma {

namespace {

size_t envSize(const char *name, size_t fallback) {
  const char *v = std::getenv(name);
  if (!v || !*v)
    return fallback;
  char *end = nullptr;
  unsigned long long n = std::strtoull(v, &end, 10);
  if (!end || *end || n == 0) {
    log::warning("rdma: ignoring ", name, "=", v, " (not a positive integer)");
    return fallback;
  }
  return static_cast<size_t>(n);
}

} // namespace

RdmaOptions RdmaOptions::fromEnvironment() {
  RdmaOptions o;
  o.chunkBytes = envSize("MONARCH_RDMA_TCP_CHUNK_BYTES", o.chunkBytes);
  o.lanes =
      static_cast<uint32_t>(envSize("MONARCH_RDMA_TCP_CONNECTIONS", o.lanes));
  o.timeout = std::chrono::milliseconds(
      envSize("MONARCH_RDMA_TIMEOUT_MS", o.timeout.count()));
  o.qp.port = static_cast<uint8_t>(envSize("MONARCH_RDMA_PORT", o.qp.port));
  o.qp.gidIndex = static_cast<uint8_t>(
      envSize("MONARCH_RDMA_GID_INDEX", o.qp.gidIndex + 1) - 1);
  return o;
}

RdmaEngine::RdmaEngine(Runtime &rt, std::unique_ptr<VerbsDevice> device,
                       RdmaOptions options)
    : rt(rt), opts(options), table(std::make_shared<BufferTable>()),
      channel(PeerChannel::create(rt)) {
  serveTcpTransfers(*channel, table);
  channel->serve("drop", [this](proto::ValueMap &&args, PayloadList &&,
                                Responder responder) {
    auto id = wire::getInt(args, "id");
    if (!id.ok())
      return responder.fail(id.status());
    Status s = dropBuffer(static_cast<uint64_t>(*id));
    if (!s.isOk())
      return responder.fail(s);
    proto::Value ok;
    ok.set_null(true);
    responder.reply(std::move(ok));
  });
  if (device)
    verbsPath = VerbsTransport::create(std::move(device), channel, opts);
}

RdmaEngine::~RdmaEngine() {
  verbsPath.reset();
  channel.reset();
}

namespace {

struct ProcessEngines {
  std::mutex mu;
  std::map<Runtime *, std::shared_ptr<RdmaEngine>> engines;
  bool chosen = false;
  BackendKind kind = BackendKind::Tcp;
  std::string error;
};

ProcessEngines &processEngines() {
  static ProcessEngines engines;
  return engines;
}

} // namespace

Expected<std::shared_ptr<RdmaEngine>> RdmaEngine::forProcess() {
  // The runtime first: function statics are destroyed in reverse order, so
  // the engines go before the global runtime they use.
  Runtime &rt = Runtime::ofProcess();
  ProcessEngines &pe = processEngines();
  std::lock_guard<std::mutex> guard(pe.mu);
  auto it = pe.engines.find(&rt);
  if (it != pe.engines.end())
    return it->second;
  if (pe.chosen && !pe.error.empty())
    return Status(ErrorCode::Invalid, pe.error);
  RdmaOptions options = RdmaOptions::fromEnvironment();
  auto provider = makeIbVerbsProvider(options.qp);
  auto choice = chooseBackend(
      provider.get(), [](const char *name) { return std::getenv(name); });
  pe.chosen = true;
  if (!choice.ok()) {
    pe.error = choice.status().message();
    return choice.status();
  }
  pe.kind = choice->kind;
  if (choice->kind == BackendKind::None) {
    pe.error = "RDMA is disabled (" + choice->reason + ")";
    return Status(ErrorCode::Invalid, pe.error);
  }
  if (choice->fellBack && pe.engines.empty())
    log::warning("monarch rdma: ", choice->reason,
                 "; using the TCP fallback (MONARCH_RDMA_BACKEND=tcp "
                 "silences this)");
  auto engine =
      std::make_shared<RdmaEngine>(rt, std::move(choice->device), options);
  pe.engines[&rt] = engine;
  return engine;
}

BackendKind RdmaEngine::processBackend() {
  {
    ProcessEngines &pe = processEngines();
    std::lock_guard<std::mutex> guard(pe.mu);
    if (pe.chosen)
      return pe.error.empty() ? pe.kind : BackendKind::None;
  }
  auto engine = forProcess();
  return engine.ok() ? (*engine)->backend() : BackendKind::None;
}

Expected<RdmaHandle> RdmaEngine::registerBuffer(void *data, size_t size,
                                                bool writable,
                                                std::shared_ptr<void> keep,
                                                std::shared_ptr<StagedMemory> staged) {
  if (!data || size == 0)
    return Status(ErrorCode::Invalid,
                  "an RDMA buffer needs non-empty memory (got " +
                      std::to_string(size) + " bytes)");
  auto region = std::make_shared<OwnedRegion>();
  region->data = static_cast<uint8_t *>(data);
  region->size = size;
  region->writable = writable;
  region->keepAlive = keep;
  region->staged = std::move(staged);
  RdmaHandle h;
  if (verbsPath && !region->staged) {
    auto keys = verbsPath->registerOwned(data, size, writable, keep);
    if (!keys.ok())
      return keys.status();
    region->verbs = *keys;
    h.device = verbsPath->deviceName();
    h.remoteAddr = reinterpret_cast<uint64_t>(data);
    h.rkey = keys->rkey;
  }
  auto addr = channel->address();
  h.ownerAddr = addr.addr;
  h.servicePort = addr.port;
  h.bufferId = table->add(region);
  h.size = size;
  h.writable = writable;
  return h;
}

Status RdmaEngine::dropBuffer(uint64_t id) {
  auto region = table->remove(id);
  if (!region)
    return droppedBufferError(id, rt.addr());
  if (region->verbs && verbsPath)
    verbsPath->releaseOwned(*region->verbs);
  return Status::ok();
}

Future<Unit> RdmaEngine::dropRemote(const RdmaHandle &handle) {
  if (handle.ownerAddr == channel->address().addr) {
    Status s = dropBuffer(handle.bufferId);
    if (!s.isOk())
      return Future<Unit>::failed(s);
    Promise<Unit> done;
    done.set(Unit{});
    return done.future();
  }
  proto::ValueMap args;
  wire::setInt(args, "id", static_cast<int64_t>(handle.bufferId));
  return channel
      ->request({handle.ownerAddr, handle.servicePort}, "drop", std::move(args),
                {}, 0, std::chrono::steady_clock::now() + opts.timeout)
      .map<Unit>([](const PeerReply &) { return Expected<Unit>(Unit{}); });
}

Status RdmaEngine::validate(const RdmaOp &op) const {
  const char *what = op.kind == RdmaOp::Kind::Read ? "read" : "write";
  if (op.length > 0 && !op.local)
    return Status(ErrorCode::Invalid,
                  std::string("RDMA ") + what + " without local memory");
  if (op.remoteOffset > op.remote.size ||
      op.length > op.remote.size - op.remoteOffset)
    return Status(ErrorCode::Invalid, std::string("RDMA ") + what + " of " +
                                          std::to_string(op.length) +
                                          " bytes at offset " +
                                          std::to_string(op.remoteOffset) +
                                          " exceeds " + op.remote.describe());
  if (op.kind == RdmaOp::Kind::Write && !op.remote.writable)
    return Status(ErrorCode::Invalid,
                  "RDMA write to read-only " + op.remote.describe());
  return Status::ok();
}

void RdmaEngine::runLocal(const RdmaOp &op,
                          const std::shared_ptr<OpTracker> &tracker) {
  auto region = table->find(op.remote.bufferId);
  if (!region)
    return tracker->fail(droppedBufferError(op.remote.bufferId, rt.addr()));
  // The handle was checked against its own size; the region decides.
  if (op.remoteOffset > region->size ||
      op.length > region->size - op.remoteOffset)
    return tracker->fail(Status(ErrorCode::Invalid,
                                "RDMA access outside " + op.remote.describe()));
  if (op.kind == RdmaOp::Kind::Write && !region->writable)
    return tracker->fail(Status(ErrorCode::Invalid, "RDMA write to read-only " +
                                                        op.remote.describe()));
  uint8_t *remote = region->data + op.remoteOffset;
  if (region->staged) {
    Status s = op.kind == RdmaOp::Kind::Read
                   ? region->staged->refresh(op.remoteOffset, op.length)
                   : region->staged->store(
                         op.remoteOffset,
                         static_cast<const uint8_t *>(op.local), op.length);
    if (!s.isOk())
      return tracker->fail(s);
    if (op.kind == RdmaOp::Kind::Write)
      return;
  }
  if (op.kind == RdmaOp::Kind::Read)
    std::memmove(op.local, remote, op.length);
  else
    std::memmove(remote, op.local, op.length);
}

Future<Unit> RdmaEngine::submit(std::vector<RdmaOp> ops) {
  for (const auto &op : ops) {
    Status s = validate(op);
    if (!s.isOk())
      return Future<Unit>::failed(s);
  }
  Promise<Unit> promise;
  auto tracker = std::make_shared<OpTracker>(promise);
  // One part for the submission itself, so the batch cannot complete while
  // operations are still being started.
  tracker->add();
  auto deadline = std::chrono::steady_clock::now() + opts.timeout;
  for (const auto &op : ops) {
    if (tracker->failed())
      break;
    if (op.length == 0)
      continue;
    if (op.remote.ownerAddr == channel->address().addr)
      runLocal(op, tracker);
    else if (verbsPath && op.remote.hasVerbs())
      verbsPath->start(op, tracker, deadline);
    else
      startTcpTransfer(*channel, op, tracker, opts, deadline);
  }
  tracker->done();
  return promise.future();
}

} // namespace monarch::rdma
