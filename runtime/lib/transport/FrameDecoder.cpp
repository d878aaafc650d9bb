#include "monarch/runtime/transport/FrameDecoder.h"

#include <algorithm>
#include <cstring>
#include <new>

namespace monarch::transport {

uint8_t *FrameDecoder::prepare(size_t n) {
  // Compact when the consumed prefix dominates, so the buffer stays bounded by
  // the largest frame plus one read.
  if (begin > 0 && (begin == end || begin > buffer.size() / 2)) {
    std::memmove(buffer.data(), buffer.data() + begin, end - begin);
    end -= begin;
    begin = 0;
  }
  if (buffer.size() - end < n)
    buffer.resize(end + n);
  return buffer.data() + end;
}

namespace {
/// Payload frames at least this long that are not yet all buffered are read
/// into their own memory (one socket read's worth: smaller ones are mostly
/// buffered whole by the time their header is seen).
constexpr size_t kDirectPayloadBytes = 64 * 1024;
} // namespace

std::pair<uint8_t *, size_t> FrameDecoder::prepareRead(size_t n) {
  if (direct)
    return {direct->memory.get() + direct->filled,
            std::min(n, direct->length - direct->filled)};
  return {prepare(n), n};
}

void FrameDecoder::commit(size_t n) {
  if (direct)
    direct->filled += n;
  else
    end += n;
}

void FrameDecoder::feed(const void *data, size_t n) {
  const auto *bytes = static_cast<const uint8_t *>(data);
  while (n > 0) {
    auto [into, room] = prepareRead(n);
    std::memcpy(into, bytes, room);
    commit(room);
    bytes += room;
    n -= room;
  }
}

Status FrameDecoder::fail(std::string why) {
  error = Status(ErrorCode::Invalid, "malformed frame: " + std::move(why));
  partial.reset();
  direct.reset();
  return error;
}

Expected<std::optional<FrameDecoder::Header>> FrameDecoder::peekHeader() {
  if (!error.isOk())
    return error;
  if (end - begin < kFrameHeaderSize)
    return std::optional<Header>();
  const uint8_t *h = buffer.data() + begin;
  if (h[0] != kFrameMagic)
    return fail("bad magic byte");
  if (h[1] != static_cast<uint8_t>(FrameKind::Control) &&
      h[1] != static_cast<uint8_t>(FrameKind::Payload))
    return fail("unknown frame kind " + std::to_string(h[1]));
  if (h[2] != 0 || h[3] != 0)
    return fail("reserved header bytes are not zero");
  uint32_t length = 0;
  for (int i = 0; i < 4; ++i)
    length |= static_cast<uint32_t>(h[4 + i]) << (8 * i);
  auto kind = static_cast<FrameKind>(h[1]);
  uint32_t max = kind == FrameKind::Control ? limits.maxControlBytes
                                            : limits.maxPayloadBytes;
  if (length > max)
    return fail("frame length " + std::to_string(length) +
                " exceeds the limit " + std::to_string(max));
  return std::optional<Header>(Header{kind, length});
}

Expected<std::optional<std::string>> FrameDecoder::nextControlBody() {
  auto header = peekHeader();
  if (!header.ok())
    return header.status();
  if (!header->has_value())
    return std::optional<std::string>();
  if ((*header)->kind != FrameKind::Control)
    return fail("expected a control frame");
  size_t length = (*header)->length;
  if (end - begin < kFrameHeaderSize + length)
    return std::optional<std::string>();
  std::string body(
      reinterpret_cast<const char *>(buffer.data() + begin + kFrameHeaderSize),
      length);
  begin += kFrameHeaderSize + length;
  return std::optional<std::string>(std::move(body));
}

Expected<std::optional<Message>> FrameDecoder::nextMessage() {
  if (!error.isOk())
    return error;
  for (;;) {
    if (!partial) {
      auto header = peekHeader();
      if (!header.ok())
        return header.status();
      if (!header->has_value())
        return std::optional<Message>();
      if ((*header)->kind != FrameKind::Control)
        return fail("payload frame without an envelope");
      size_t length = (*header)->length;
      if (end - begin < kFrameHeaderSize + length)
        return std::optional<Message>();
      Message message;
      if (!message.envelope.ParseFromArray(buffer.data() + begin +
                                               kFrameHeaderSize,
                                           static_cast<int>(length)))
        return fail("envelope does not parse");
      begin += kFrameHeaderSize + length;
      const auto &sizes = message.envelope.payload_sizes();
      if (static_cast<uint64_t>(sizes.size()) > limits.maxPayloadsPerMessage)
        return fail("too many payload frames");
      for (uint64_t size : sizes)
        if (size > limits.maxPayloadBytes)
          return fail("declared payload size exceeds the limit");
      message.payloads.reserve(sizes.size());
      partial = std::move(message);
    }
    if (direct) {
      if (direct->filled < direct->length)
        return std::optional<Message>();
      const uint8_t *bytes = direct->memory.get();
      partial->payloads.emplace_back(std::move(direct->memory), bytes,
                                     direct->length);
      direct.reset();
      continue;
    }
    size_t have = partial->payloads.size();
    const auto &sizes = partial->envelope.payload_sizes();
    if (have == static_cast<size_t>(sizes.size())) {
      std::optional<Message> done = std::move(partial);
      partial.reset();
      return done;
    }
    auto header = peekHeader();
    if (!header.ok())
      return header.status();
    if (!header->has_value())
      return std::optional<Message>();
    if ((*header)->kind != FrameKind::Payload)
      return fail("expected a payload frame");
    if ((*header)->length != sizes[have])
      return fail("payload frame length differs from the envelope");
    size_t length = (*header)->length;
    if (end - begin < kFrameHeaderSize + length) {
      if (length < kDirectPayloadBytes)
        return std::optional<Message>();
      // The rest of this payload is read straight into its own memory
      // (left uninitialised: every byte is written by the copy below or a
      // read).
      // An allocation failure fails this connection, not the process.
      DirectPayload d;
      uint8_t *raw = new (std::nothrow) uint8_t[length];
      if (!raw)
        return fail("cannot allocate a payload of " + std::to_string(length) +
                    " bytes");
      d.memory = std::shared_ptr<uint8_t[]>(raw);
      d.length = length;
      d.filled = end - begin - kFrameHeaderSize;
      std::memcpy(d.memory.get(), buffer.data() + begin + kFrameHeaderSize,
                  d.filled);
      begin = end;
      direct = std::move(d);
      return std::optional<Message>();
    }
    partial->payloads.push_back(
        Buffer::copyOf(buffer.data() + begin + kFrameHeaderSize, length));
    begin += kFrameHeaderSize + length;
  }
}

} // namespace monarch::transport
