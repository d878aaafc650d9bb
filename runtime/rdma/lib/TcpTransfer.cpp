//===- TcpTransfer.cpp - Chunked transfers over the runtime's transport --===//
#include "monarch/rdma/TcpTransfer.h"

#include "WireValues.h"

#include "monarch/runtime/proc/Runtime.h"

#include <tbb/task_arena.h>

#include <cstring>

namespace monarch::rdma {

Status droppedBufferError(uint64_t id, const std::string &owner) {
  return Status(ErrorCode::NotFound,
                "RDMA buffer " + std::to_string(id) + " on " + owner +
                    " was dropped (or never registered there)");
}

namespace {

/// Chunks up to this size are copied on the io thread that received them.
constexpr size_t kInlineCopyBytes = 256 * 1024;

Status rangeError(const OwnedRegion &r, int64_t offset, int64_t length) {
  return Status(ErrorCode::Invalid,
                "RDMA access of " + std::to_string(length) +
                    " bytes at offset " + std::to_string(offset) +
                    " is outside buffer " + std::to_string(r.id) + " (" +
                    std::to_string(r.size) + " bytes)");
}

bool inRange(const OwnedRegion &r, int64_t offset, int64_t length) {
  return offset >= 0 && length >= 0 &&
         static_cast<uint64_t>(offset) <= r.size &&
         static_cast<uint64_t>(length) <= r.size - offset;
}

} // namespace

void serveTcpTransfers(PeerChannel &channel,
                       std::shared_ptr<BufferTable> table) {
  std::string self = channel.address().addr;
  tbb::task_arena *arena = &channel.runtime().arena();
  channel.serve("read", [table, self, arena](proto::ValueMap &&args,
                                             PayloadList &&,
                                             Responder responder) {
    auto id = wire::getInt(args, "id");
    auto offset = wire::getInt(args, "offset");
    auto length = wire::getInt(args, "length");
    if (!id.ok() || !offset.ok() || !length.ok())
      return responder.fail(Status(ErrorCode::Invalid, "malformed RDMA read"));
    auto region = table->find(static_cast<uint64_t>(*id));
    if (!region)
      return responder.fail(droppedBufferError(*id, self));
    if (!inRange(*region, *offset, *length))
      return responder.fail(rangeError(*region, *offset, *length));
    // Sent from the registered memory itself; the region entry keeps the
    // memory's owner alive until the socket has written it.
    auto send = [region, offset = *offset, length = *length, responder] {
      if (region->staged) {
        Status s = region->staged->refresh(static_cast<size_t>(offset),
                                           static_cast<size_t>(length));
        if (!s.isOk())
          return responder.fail(s);
      }
      PayloadList payloads;
      payloads.emplace_back(std::shared_ptr<const void>(region),
                            region->data + offset, static_cast<size_t>(length));
      proto::Value ok;
      ok.set_null(true);
      responder.reply(std::move(ok), std::move(payloads));
    };
    // A host copy is refreshed off the io thread (it is a GPU copy).
    if (region->staged)
      arena->enqueue(std::move(send));
    else
      send();
  });
  channel.serve("write", [table, self, arena](proto::ValueMap &&args,
                                              PayloadList &&payloads,
                                              Responder responder) {
    auto id = wire::getInt(args, "id");
    auto offset = wire::getInt(args, "offset");
    if (!id.ok() || !offset.ok() || payloads.size() != 1)
      return responder.fail(Status(ErrorCode::Invalid, "malformed RDMA write"));
    auto region = table->find(static_cast<uint64_t>(*id));
    if (!region)
      return responder.fail(droppedBufferError(*id, self));
    if (!region->writable)
      return responder.fail(
          Status(ErrorCode::Invalid,
                 "RDMA buffer " + std::to_string(*id) + " is read-only"));
    auto length = static_cast<int64_t>(payloads[0].size());
    if (!inRange(*region, *offset, length))
      return responder.fail(rangeError(*region, *offset, length));
    auto copy = [region, offset = *offset, bytes = std::move(payloads[0]),
                 responder] {
      if (region->staged) {
        Status s = region->staged->store(
            static_cast<size_t>(offset),
            static_cast<const uint8_t *>(bytes.data()), bytes.size());
        if (!s.isOk())
          return responder.fail(s);
      } else {
        std::memcpy(region->data + offset, bytes.data(), bytes.size());
      }
      proto::Value ok;
      ok.set_null(true);
      responder.reply(std::move(ok));
    };
    // A large chunk is copied on the actor arena, like a read's chunk on
    // the requester, so the io thread goes back to the socket; a small one
    // costs less than the hand-off.
    if (length <= static_cast<int64_t>(kInlineCopyBytes) && !region->staged)
      copy();
    else
      arena->enqueue(std::move(copy));
  });
}

void startTcpTransfer(PeerChannel &channel, const RdmaOp &op,
                      const std::shared_ptr<OpTracker> &tracker,
                      const RdmaOptions &options,
                      std::chrono::steady_clock::time_point deadline) {
  PeerAddress to{op.remote.ownerAddr, op.remote.servicePort};
  size_t chunk = std::max<size_t>(options.chunkBytes, 1);
  uint32_t lanes = std::max<uint32_t>(options.lanes, 1);
  size_t parts = (op.length + chunk - 1) / chunk;
  tracker->add(parts);
  auto *local = static_cast<uint8_t *>(op.local);
  auto keep = op.keepLocal;
  tbb::task_arena *arena = &channel.runtime().arena();
  bool single = parts == 1;
  for (size_t i = 0; i < parts; ++i) {
    size_t pos = i * chunk;
    size_t n = std::min(chunk, op.length - pos);
    proto::ValueMap args;
    wire::setInt(args, "id", static_cast<int64_t>(op.remote.bufferId));
    wire::setInt(args, "offset", static_cast<int64_t>(op.remoteOffset + pos));
    uint32_t lane = static_cast<uint32_t>(i % lanes);
    if (op.kind == RdmaOp::Kind::Write) {
      PayloadList payloads;
      payloads.emplace_back(keep ? std::shared_ptr<const void>(keep)
                                 : std::shared_ptr<const void>(),
                            local + pos, n);
      channel
          .request(to, "write", std::move(args), std::move(payloads), lane,
                   deadline)
          .then([tracker](const Expected<PeerReply> &reply) {
            if (!reply.ok())
              return tracker->fail(reply.status());
            tracker->done();
          });
      continue;
    }
    wire::setInt(args, "length", static_cast<int64_t>(n));
    channel.request(to, "read", std::move(args), {}, lane, deadline)
        .then([tracker, local, pos, n, keep, arena,
               single](const Expected<PeerReply> &reply) {
          if (!reply.ok())
            return tracker->fail(reply.status());
          if (reply->payloads.size() != 1 || reply->payloads[0].size() != n)
            return tracker->fail(
                Status(ErrorCode::Internal, "RDMA read reply of wrong size"));
          auto copy = [tracker, local, pos, bytes = reply->payloads[0], keep] {
            if (!tracker->failed())
              std::memcpy(local + pos, bytes.data(), bytes.size());
            tracker->done();
          };
          // With more chunks coming, the copy runs on the actor arena so the
          // io thread goes back to reading the next one; a lone or small
          // chunk has nothing to overlap with and is copied here.
          if (single || n <= kInlineCopyBytes)
            copy();
          else
            arena->enqueue(std::move(copy));
        });
  }
}

} // namespace monarch::rdma
