//===- CudaIpcRing.h - Point-to-point on one GPU between processes -*- C++ -*-//
//
// Usage (one direction, sender process S to receiver process R, both on one
// GPU):
//
//   // S, at its first send to R:
//   auto ring = cudaipc::SendRing::create(stream);   // current device
//   store->set(key, ring.ok() ? (*ring)->descriptor() : errorDescriptor(..));
//   // R, at its first receive from S:
//   auto ring = cudaipc::ReceiveRing::open(store->get(key, t), stream);
//   // then, each transfer, polled until done (bounded by the caller):
//   S: ring->push(src, bytes, offset, tag)    R: ring->pop(dst, bytes, offset, tag)
//
// Why: NCCL refuses two members of a communicator on one device, and moving
// a tensor through Gloo costs a device-to-host copy, a host synchronization,
// a socket round trip, a host-to-device copy and a second synchronization,
// each of which also drains the GPU queue the host could have run ahead of.
// The pipeline job's stages on a one-GPU machine spent most of a step there.
// Here the bytes never leave the device and neither host waits for the GPU:
// the sender copies into a slot of device memory it shares with the receiver
// through CUDA IPC and records the slot's "ready" event on its stream; the
// receiver's stream waits on that event, copies the slot out and records the
// slot's "consumed" event, which the sender's stream waits on before it
// writes that slot again. Which slot holds what, and that an event has been
// recorded (a cross-process stream wait waits for the event's last record
// made before it, so the record must come first on the host), is told
// through a small control block in POSIX shared memory: a single-producer,
// single-consumer queue of kSlots entries. Transfers larger than a slot are
// carried in slot-sized chunks. So a send returns once enqueued unless the
// receiver is kSlots chunks behind, and a receive returns once the sender
// has enqueued what it waits for: failures (the peer gone, a mismatched
// transfer) surface at the instruction, bounded by the caller's timeout.
//
// Only for processes on one host sharing one physical GPU (the CUDA
// backend's device identities say so); both rings of a pair are on the
// device current when they are made.
//
//===----------------------------------------------------------------------===//
#ifndef MONARCH_TENSOR_COLLECTIVES_CUDAIPCRING_H
#define MONARCH_TENSOR_COLLECTIVES_CUDAIPCRING_H

#include "SharedMemory.h"
#include "monarch/tensor/Collectives.h"

#include <cuda_runtime.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace monarch::tensor::cudaipc {

/// Chunks in flight per direction, and the bytes of each: 32 MiB of device
/// memory per direction bounds what a pair holds; eight slots let a pipeline
/// stage run eight microbatches ahead of its peer without waiting.
constexpr uint32_t kSlots = 8;
constexpr size_t kSlotBytes = size_t(4) << 20;
/// How long an end that goes waits for the copies of its slots in flight.
constexpr std::chrono::milliseconds kDrainTimeout{2000};

struct Control;

/// A descriptor that tells the receiver the sender could not make its ring
/// (`why`): both sides then move this direction another way.
std::vector<char> errorDescriptor(const std::string &why);

/// What both ends hold: the control block, the device slots and each
/// slot's two events (destroyed with the end), used on the caller's stream.
class RingEnd {
public:
  RingEnd(const RingEnd &) = delete;
  RingEnd &operator=(const RingEnd &) = delete;

protected:
  RingEnd() = default;
  ~RingEnd();
  /// Tells the other end that this one is gone.
  void markGone(uint32_t closedBit);

  std::unique_ptr<SharedMemory> shared;
  Control *control = nullptr;
  char *slots = nullptr;
  cudaEvent_t ready[kSlots] = {};    // recorded by the sender, per slot
  cudaEvent_t consumed[kSlots] = {}; // recorded by the receiver, per slot
  cudaStream_t stream = nullptr;
};

/// The sending end, owned by the sender: it makes the shared memory, the
/// device slots and the events.
class SendRing : public RingEnd {
public:
  static Expected<std::unique_ptr<SendRing>> create(cudaStream_t stream);
  /// Tells the receiver this end is gone; its slots are freed.
  ~SendRing();

  /// What the receiver opens (names the shared memory and the IPC handles).
  const std::vector<char> &descriptor() const { return desc; }

  /// Enqueues the chunks of `data[offset, bytes)` on the stream while slots
  /// are free, advancing `offset`. True when the whole transfer (an empty
  /// one included) is enqueued; false when the ring is full (call again).
  Expected<bool> push(const char *data, size_t bytes, size_t &offset,
                      uint64_t tag);

  /// Waits, up to `timeout`, until the receiver has copied out every chunk
  /// pushed, as an end must before it goes (its slots are freed with it)
  /// unless its communicator was aborted; at once when the receiver is gone.
  void drain(std::chrono::milliseconds timeout);

private:
  SendRing() = default;
  uint64_t published = 0; // entries pushed, the next one's sequence number
  std::vector<char> desc;
};

/// The receiving end: opens what the sender made.
class ReceiveRing : public RingEnd {
public:
  /// Fails with NotFound and the sender's reason when `descriptor` is an
  /// error one.
  static Expected<std::unique_ptr<ReceiveRing>>
  open(const std::vector<char> &descriptor, cudaStream_t stream);
  /// Waits, bounded, for the copies out of the sender's slots it enqueued
  /// (the slots are unmapped with this end), then tells the sender.
  ~ReceiveRing();

  /// Enqueues the copies of the chunks the sender has published into
  /// `data[offset, bytes)`, advancing `offset`. True when the transfer is
  /// complete; false when the sender has not yet enqueued the next chunk.
  /// A chunk of another tag or size is an error (the two sides disagree on
  /// the order of their transfers), as is a sender that is gone.
  Expected<bool> pop(char *data, size_t bytes, size_t &offset, uint64_t tag);

private:
  ReceiveRing() = default;
  uint64_t taken = 0; // entries popped
};

} // namespace monarch::tensor::cudaipc

#endif // MONARCH_TENSOR_COLLECTIVES_CUDAIPCRING_H
