//===- CudaIpcRing.cpp - Point-to-point on one GPU between processes ------===//
//
// See CudaIpcRing.h. The control block's counters are the only state both
// processes write: the sender `published`, the receiver `consumed`, each
// with release order after the entry or the event record it announces, so
// the other side that reads the counter with acquire order sees both.
//
//===----------------------------------------------------------------------===//

#include "CudaIpcRing.h"
#include "SharedMemory.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>

namespace monarch::tensor::cudaipc {

/// One chunk in a slot: which transfer it belongs to and where it goes.
struct Entry {
  uint64_t tag;
  uint64_t total;  // the transfer's bytes
  uint64_t offset; // of this chunk in the transfer
  uint64_t bytes;  // of this chunk
};

enum Closed : uint32_t { SenderGone = 1, ReceiverGone = 2 };

struct Control {
  std::atomic<uint64_t> published; // entries the sender has written
  std::atomic<uint64_t> consumed;  // entries whose copy out is enqueued
  std::atomic<uint32_t> closed;    // Closed bits
  Entry entries[kSlots];
};
static_assert(std::atomic<uint64_t>::is_always_lock_free &&
                  std::atomic<uint32_t>::is_always_lock_free,
              "the control block is shared between processes");

namespace {

constexpr char kMagic[8] = {'M', 'N', 'R', 'C', 'I', 'P', 'C', '1'};

/// What the receiver needs, as the sender publishes it (plain bytes: both
/// processes run this build).
struct Descriptor {
  char magic[8];
  char shmName[64];
  uint64_t slotBytes;
  uint32_t slots;
  cudaIpcMemHandle_t memory;
  cudaIpcEventHandle_t ready[kSlots];
  cudaIpcEventHandle_t consumed[kSlots];
};

Status cudaStatus(cudaError_t e, const char *what) {
  if (e == cudaSuccess)
    return Status();
  return Status(ErrorCode::Internal, std::string("cuda ipc: ") + what + ": " +
                                         cudaGetErrorString(e));
}

/// Polls `event` (recorded before the call) until it completes or
/// `deadline`.
void waitBounded(cudaEvent_t event,
                 std::chrono::steady_clock::time_point deadline) {
  while (cudaEventQuery(event) == cudaErrorNotReady &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::microseconds(50));
}

} // namespace

std::vector<char> errorDescriptor(const std::string &why) {
  std::string text = "error: " + why;
  return std::vector<char>(text.begin(), text.end());
}

Expected<std::unique_ptr<SendRing>> SendRing::create(cudaStream_t stream) {
  std::unique_ptr<SendRing> ring(new SendRing());
  ring->stream = stream;
  auto shared = SharedMemory::create("ipc", sizeof(Control));
  if (!shared.ok())
    return shared.status();
  ring->shared = std::move(shared).value();
  ring->control = new (ring->shared->address()) Control{};

  Descriptor d{};
  std::memcpy(d.magic, kMagic, sizeof(kMagic));
  const std::string &name = ring->shared->name();
  if (name.size() >= sizeof(d.shmName))
    return Status(ErrorCode::Internal, "cuda ipc: shared memory name too long");
  std::memcpy(d.shmName, name.c_str(), name.size() + 1);
  d.slotBytes = kSlotBytes;
  d.slots = kSlots;
  void *slots = nullptr;
  if (Status s = cudaStatus(cudaMalloc(&slots, kSlots * kSlotBytes),
                            "allocate the ring's slots");
      !s.isOk())
    return s;
  ring->slots = static_cast<char *>(slots);
  if (Status s = cudaStatus(cudaIpcGetMemHandle(&d.memory, slots),
                            "export the ring's slots");
      !s.isOk())
    return s;
  for (uint32_t i = 0; i < kSlots; ++i) {
    for (auto [events, handles] :
         {std::pair{ring->ready, d.ready}, {ring->consumed, d.consumed}}) {
      if (Status s = cudaStatus(
              cudaEventCreateWithFlags(&events[i], cudaEventDisableTiming |
                                                       cudaEventInterprocess),
              "create an interprocess event");
          !s.isOk())
        return s;
      if (Status s = cudaStatus(cudaIpcGetEventHandle(&handles[i], events[i]),
                                "export an event");
          !s.isOk())
        return s;
    }
  }
  const char *bytes = reinterpret_cast<const char *>(&d);
  ring->desc.assign(bytes, bytes + sizeof(d));
  return ring;
}

void SendRing::drain(std::chrono::milliseconds timeout) {
  if (!control || published == 0)
    return;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!(control->closed.load(std::memory_order_acquire) & ReceiverGone) &&
         control->consumed.load(std::memory_order_acquire) < published) {
    if (std::chrono::steady_clock::now() >= deadline)
      return;
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  if (!(control->closed.load(std::memory_order_acquire) & ReceiverGone))
    waitBounded(consumed[(published - 1) % kSlots], deadline);
}

RingEnd::~RingEnd() {
  for (uint32_t i = 0; i < kSlots; ++i) {
    if (ready[i])
      cudaEventDestroy(ready[i]);
    if (consumed[i])
      cudaEventDestroy(consumed[i]);
  }
}

void RingEnd::markGone(uint32_t closedBit) {
  if (control)
    control->closed.fetch_or(closedBit, std::memory_order_release);
}

SendRing::~SendRing() {
  markGone(SenderGone);
  if (slots)
    cudaFree(slots);
}

Expected<bool> SendRing::push(const char *data, size_t bytes, size_t &offset,
                              uint64_t tag) {
  do {
    if (control->closed.load(std::memory_order_acquire) & ReceiverGone)
      return Status(ErrorCode::Closed,
                    "cuda ipc: the receiving process closed its end");
    if (published - control->consumed.load(std::memory_order_acquire) >=
        kSlots)
      return false;
    uint32_t slot = published % kSlots;
    char *into = slots + slot * kSlotBytes;
    size_t chunk = std::min(kSlotBytes, bytes - offset);
    // The receiver's copy of the slot's previous chunk is enqueued (the
    // counter says so), so its consumed record precedes this wait.
    if (published >= kSlots)
      if (Status s = cudaStatus(cudaStreamWaitEvent(stream, consumed[slot], 0),
                                "wait for a slot");
          !s.isOk())
        return s;
    if (chunk > 0)
      if (Status s = cudaStatus(cudaMemcpyAsync(into, data + offset, chunk,
                                                cudaMemcpyDeviceToDevice,
                                                stream),
                                "copy into a slot");
          !s.isOk())
        return s;
    if (Status s = cudaStatus(cudaEventRecord(ready[slot], stream),
                              "record a slot's event");
        !s.isOk())
      return s;
    control->entries[slot] = Entry{tag, bytes, offset, chunk};
    control->published.store(++published, std::memory_order_release);
    offset += chunk;
  } while (offset < bytes);
  return true;
}

Expected<std::unique_ptr<ReceiveRing>>
ReceiveRing::open(const std::vector<char> &descriptor, cudaStream_t stream) {
  Descriptor d;
  if (descriptor.size() != sizeof(d) ||
      std::memcmp(descriptor.data(), kMagic, sizeof(kMagic)) != 0)
    return Status(ErrorCode::NotFound,
                  "cuda ipc: the sender has no ring: " +
                      std::string(descriptor.begin(), descriptor.end()));
  std::memcpy(&d, descriptor.data(), sizeof(d));
  if (d.slots != kSlots || d.slotBytes != kSlotBytes)
    return Status(ErrorCode::Internal,
                  "cuda ipc: the sender's ring has another shape");
  std::unique_ptr<ReceiveRing> ring(new ReceiveRing());
  ring->stream = stream;
  d.shmName[sizeof(d.shmName) - 1] = '\0';
  auto shared = SharedMemory::open(d.shmName, sizeof(Control));
  if (!shared.ok())
    return shared.status();
  ring->shared = std::move(shared).value();
  ring->shared->unlink(); // both ends hold it mapped now
  ring->control = static_cast<Control *>(ring->shared->address());
  void *slots = nullptr;
  if (Status s = cudaStatus(cudaIpcOpenMemHandle(&slots, d.memory,
                                                 cudaIpcMemLazyEnablePeerAccess),
                            "open the sender's slots");
      !s.isOk())
    return s;
  ring->slots = static_cast<char *>(slots);
  for (uint32_t i = 0; i < kSlots; ++i)
    for (auto [events, handles] :
         {std::pair{ring->ready, d.ready}, {ring->consumed, d.consumed}})
      if (Status s = cudaStatus(cudaIpcOpenEventHandle(&events[i], handles[i]),
                                "open the sender's events");
          !s.isOk())
        return s;
  return ring;
}

ReceiveRing::~ReceiveRing() {
  if (taken > 0)
    waitBounded(consumed[(taken - 1) % kSlots],
                std::chrono::steady_clock::now() + kDrainTimeout);
  markGone(ReceiverGone);
  if (slots)
    cudaIpcCloseMemHandle(slots);
}

Expected<bool> ReceiveRing::pop(char *data, size_t bytes, size_t &offset,
                                uint64_t tag) {
  do {
    if (control->published.load(std::memory_order_acquire) <= taken) {
      if (control->closed.load(std::memory_order_acquire) & SenderGone)
        return Status(ErrorCode::Closed,
                      "cuda ipc: the sending process closed its end");
      return false;
    }
    uint32_t slot = taken % kSlots;
    Entry e = control->entries[slot];
    if (e.tag != tag || e.total != bytes || e.offset != offset)
      return Status(
          ErrorCode::Internal,
          "cuda ipc: the sender's next transfer (tag " + std::to_string(e.tag) +
              ", " + std::to_string(e.total) + " bytes, chunk at " +
              std::to_string(e.offset) + ") is not the receive posted (tag " +
              std::to_string(tag) + ", " + std::to_string(bytes) +
              " bytes, at " + std::to_string(offset) + ")");
    if (Status s = cudaStatus(cudaStreamWaitEvent(stream, ready[slot], 0),
                              "wait for a slot");
        !s.isOk())
      return s;
    if (e.bytes > 0)
      if (Status s = cudaStatus(
              cudaMemcpyAsync(data + offset, slots + slot * kSlotBytes,
                              e.bytes, cudaMemcpyDeviceToDevice, stream),
              "copy out of a slot");
          !s.isOk())
        return s;
    if (Status s = cudaStatus(cudaEventRecord(consumed[slot], stream),
                              "record a slot's event");
        !s.isOk())
      return s;
    control->consumed.store(++taken, std::memory_order_release);
    offset += e.bytes;
  } while (offset < bytes);
  return true;
}

} // namespace monarch::tensor::cudaipc
