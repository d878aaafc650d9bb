#include "monarch/runtime/transport/FrameDecoder.h"

#include <cstring>

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

void FrameDecoder::commit(size_t n) { end += n; }

void FrameDecoder::feed(const void *data, size_t n) {
  std::memcpy(prepare(n), data, n);
  commit(n);
}

Status FrameDecoder::fail(std::string why) {
  error = Status(ErrorCode::Invalid, "malformed frame: " + std::move(why));
  partial.reset();
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
    if (end - begin < kFrameHeaderSize + length)
      return std::optional<Message>();
    partial->payloads.push_back(
        Buffer::copyOf(buffer.data() + begin + kFrameHeaderSize, length));
    begin += kFrameHeaderSize + length;
  }
}

} // namespace monarch::transport
