//===- Message.h - A control envelope plus raw payload frames ---*- C++ -*-===//
//
// Large values (tensor bytes) are carried as Buffers beside the protobuf
// envelope. A Buffer shares ownership of memory it does not copy, so a sender
// can hand a tensor's storage to the transport and the socket writes it with
// vectored I/O straight from there.
//
//===----------------------------------------------------------------------===//
#ifndef MONARCH_RUNTIME_TRANSPORT_MESSAGE_H
#define MONARCH_RUNTIME_TRANSPORT_MESSAGE_H

#include "runtime.pb.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace monarch::transport {

/// A read-only view of bytes kept alive by `owner`.
class Buffer {
public:
  Buffer() = default;
  Buffer(std::shared_ptr<const void> owner, const uint8_t *data, size_t size)
      : owner(std::move(owner)), bytes(data), length(size) {}

  /// Takes the string (no copy of its characters).
  static Buffer fromString(std::string text);
  /// Copies `size` bytes.
  static Buffer copyOf(const void *data, size_t size);

  const uint8_t *data() const { return bytes; }
  size_t size() const { return length; }
  std::string toString() const {
    return std::string(reinterpret_cast<const char *>(bytes), length);
  }

private:
  std::shared_ptr<const void> owner;
  const uint8_t *bytes = nullptr;
  size_t length = 0;
};

struct Message {
  proto::Envelope envelope;
  std::vector<Buffer> payloads;
  /// Flow-control credit of the connection the message arrived on: the
  /// connection reads no further while too many bytes it delivered are
  /// still held (Transport.h). Whoever keeps the message's work for later
  /// (a mailbox, a forwarded copy, a send queue) keeps this with it.
  std::shared_ptr<const void> credit;
  /// Someone blocks until this message (a call, or a reply to one) is
  /// handled: an idle socket link writes it from the sending thread at once,
  /// never leaving it to the io thread to batch (Transport.h). Not sent.
  bool awaited = false;
};

} // namespace monarch::transport

#endif // MONARCH_RUNTIME_TRANSPORT_MESSAGE_H
