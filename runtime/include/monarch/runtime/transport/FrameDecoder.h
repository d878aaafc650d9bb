//===- FrameDecoder.h - Incremental, bounds-checked decoding ----*- C++ -*-===//
//
// Bytes from a socket go in (possibly split anywhere); whole messages come
// out. Every length and field is checked before it is trusted: a bad frame
// yields an error Status, after which the decoder stays failed and the
// connection is closed by its owner. This class is the libFuzzer target.
//
//===----------------------------------------------------------------------===//
#ifndef MONARCH_RUNTIME_TRANSPORT_FRAMEDECODER_H
#define MONARCH_RUNTIME_TRANSPORT_FRAMEDECODER_H

#include "monarch/runtime/transport/Frame.h"

#include <memory>
#include <optional>
#include <utility>

namespace monarch::transport {

class FrameDecoder {
public:
  explicit FrameDecoder(FrameLimits limits = {}) : limits(limits) {}

  /// Where the next bytes read go and how many (at most `n`): the decoder's
  /// buffer, or, while a large payload frame arrives, that payload's own
  /// memory, so its bytes are not copied out of the buffer afterwards. Read
  /// into it, then commit() what was read.
  std::pair<uint8_t *, size_t> prepareRead(size_t n);
  void commit(size_t n);
  /// Copying convenience over prepare/commit.
  void feed(const void *data, size_t n);

  /// The next whole message; nullopt when more bytes are needed.
  Expected<std::optional<Message>> nextMessage();
  /// The next control frame parsed as `T` (used during the handshake, which
  /// precedes any Envelope).
  template <typename T> Expected<std::optional<T>> nextControl() {
    auto body = nextControlBody();
    if (!body.ok())
      return body.status();
    if (!body->has_value())
      return std::optional<T>();
    T parsed;
    if (!parsed.ParseFromString(**body))
      return fail("control frame is not a valid " + parsed.GetTypeName());
    return std::optional<T>(std::move(parsed));
  }

  /// New limits for what follows (a connection that authenticated moves
  /// from kHandshakeLimits to the full ones).
  void setLimits(FrameLimits next) { limits = next; }

  bool failed() const { return !error.isOk(); }
  size_t bufferedBytes() const { return end - begin; }

private:
  struct Header {
    FrameKind kind;
    uint32_t length;
  };
  /// Header of the frame at `begin` if all of it is buffered.
  Expected<std::optional<Header>> peekHeader();
  Expected<std::optional<std::string>> nextControlBody();
  Status fail(std::string why);

  /// Space for at least `n` more bytes in `buffer`.
  uint8_t *prepare(size_t n);

  /// A payload frame read straight into its own memory.
  struct DirectPayload {
    std::shared_ptr<uint8_t[]> memory;
    size_t length = 0;
    size_t filled = 0;
  };

  FrameLimits limits;
  std::optional<DirectPayload> direct;
  std::vector<uint8_t> buffer;
  size_t begin = 0;
  size_t end = 0;
  Status error;
  // A message whose envelope is decoded but whose payloads are still arriving.
  std::optional<Message> partial;
};

} // namespace monarch::transport

#endif // MONARCH_RUNTIME_TRANSPORT_FRAMEDECODER_H
