#include "monarch/runtime/transport/Frame.h"

#include <cstring>

namespace monarch::transport {

Buffer Buffer::fromString(std::string text) {
  auto owner = std::make_shared<std::string>(std::move(text));
  const auto *data = reinterpret_cast<const uint8_t *>(owner->data());
  size_t size = owner->size();
  return Buffer(std::move(owner), data, size);
}

Buffer Buffer::copyOf(const void *data, size_t size) {
  return fromString(std::string(static_cast<const char *>(data), size));
}

void writeFrameHeader(FrameKind kind, uint32_t length, uint8_t *out) {
  out[0] = kFrameMagic;
  out[1] = static_cast<uint8_t>(kind);
  out[2] = 0;
  out[3] = 0;
  for (int i = 0; i < 4; ++i)
    out[4 + i] = static_cast<uint8_t>(length >> (8 * i));
}

size_t EncodedMessage::totalBytes() const {
  size_t total = control.size() + payloadHeaders.size();
  for (const auto &p : payloads)
    total += p.size();
  return total;
}

namespace {
/// A control frame of `body`, whose size was just computed by ByteSizeLong
/// (so serializing reuses the cached sizes instead of walking it again).
std::string encodeSizedControlFrame(const google::protobuf::MessageLite &body,
                                    size_t size) {
  std::string out(kFrameHeaderSize + size, '\0');
  writeFrameHeader(FrameKind::Control, static_cast<uint32_t>(size),
                   reinterpret_cast<uint8_t *>(out.data()));
  body.SerializeWithCachedSizesToArray(reinterpret_cast<uint8_t *>(out.data()) +
                                       kFrameHeaderSize);
  return out;
}
} // namespace

std::string encodeControlFrame(const google::protobuf::MessageLite &body) {
  return encodeSizedControlFrame(body, body.ByteSizeLong());
}

namespace {
std::string mib(size_t bytes) {
  return std::to_string(bytes >> 20) + " MiB";
}
} // namespace

Status checkEncodable(const Message &message, const FrameLimits &limits) {
  if (message.payloads.size() > limits.maxPayloadsPerMessage)
    return Status(ErrorCode::Invalid,
                  "a message of " + std::to_string(message.payloads.size()) +
                      " payload frames exceeds the limit of " +
                      std::to_string(limits.maxPayloadsPerMessage));
  for (const auto &p : message.payloads)
    if (p.size() > limits.maxPayloadBytes)
      return Status(ErrorCode::Invalid,
                    "a payload frame of " + std::to_string(p.size()) +
                        " bytes exceeds the limit of " +
                        mib(limits.maxPayloadBytes));
  // payload_sizes is filled in at encoding: at most 11 bytes per payload.
  size_t control =
      message.envelope.ByteSizeLong() + 11 * message.payloads.size() + 16;
  if (control > limits.maxControlBytes)
    return Status(ErrorCode::Invalid,
                  "a message whose control part is " + std::to_string(control) +
                      " bytes exceeds the limit of " +
                      mib(limits.maxControlBytes) +
                      " (values in it: strings, lists, protobufs); send "
                      "large data as a monarch::Blob, which travels as a "
                      "payload frame of up to " +
                      mib(limits.maxPayloadBytes));
  return Status::ok();
}

Expected<EncodedMessage> encodeMessage(Message message,
                                       const FrameLimits &limits) {
  if (message.payloads.size() > limits.maxPayloadsPerMessage)
    return Status(ErrorCode::Invalid, "too many payload frames");
  auto &env = message.envelope;
  env.clear_payload_sizes();
  EncodedMessage out;
  out.payloadHeaders.resize(kFrameHeaderSize * message.payloads.size());
  for (size_t i = 0; i < message.payloads.size(); ++i) {
    size_t size = message.payloads[i].size();
    if (size > limits.maxPayloadBytes)
      return Status(ErrorCode::Invalid, "payload frame of " +
                                            std::to_string(size) +
                                            " bytes exceeds the limit");
    env.add_payload_sizes(size);
    writeFrameHeader(FrameKind::Payload, static_cast<uint32_t>(size),
                     reinterpret_cast<uint8_t *>(out.payloadHeaders.data()) +
                         kFrameHeaderSize * i);
  }
  size_t size = env.ByteSizeLong();
  if (size > limits.maxControlBytes)
    return Status(ErrorCode::Invalid, "control frame exceeds the limit");
  out.control = encodeSizedControlFrame(env, size);
  out.payloads = std::move(message.payloads);
  out.credit = std::move(message.credit);
  return out;
}

} // namespace monarch::transport
