//===- Frame.h - Length-prefixed frames on a byte stream --------*- C++ -*-===//
//
// Every frame starts with an 8-byte header:
//   byte 0   'M' (magic; catches a peer speaking another protocol)
//   byte 1   kind: 1 = control (a protobuf), 2 = payload (raw bytes)
//   byte 2-3 zero (reserved)
//   byte 4-7 body length, little endian
// A message is one control frame (an Envelope) followed by exactly
// `payload_sizes.size()` payload frames of those sizes.
//
//===----------------------------------------------------------------------===//
#ifndef MONARCH_RUNTIME_TRANSPORT_FRAME_H
#define MONARCH_RUNTIME_TRANSPORT_FRAME_H

#include "monarch/runtime/transport/Message.h"
#include "monarch/runtime/util/Status.h"

#include <cstdint>
#include <string>
#include <vector>

namespace monarch::transport {

enum class FrameKind : uint8_t { Control = 1, Payload = 2 };

constexpr size_t kFrameHeaderSize = 8;
constexpr uint8_t kFrameMagic = 'M';

/// Bounds enforced on everything read from a peer.
struct FrameLimits {
  uint32_t maxControlBytes = 16u << 20;
  uint32_t maxPayloadBytes = 1u << 30;
  uint32_t maxPayloadsPerMessage = 4096;
};

/// What a peer may send before it has authenticated: one control frame of a
/// Handshake (two 32-byte fields) at a time, no payloads. So an
/// unauthenticated connection holds at most one read's worth of memory, not
/// the 16 MiB partial frame the limits above would allow.
inline constexpr FrameLimits kHandshakeLimits{256, 0, 0};

void writeFrameHeader(FrameKind kind, uint32_t length, uint8_t *out);

/// A message laid out for a vectored write: `control` holds the control
/// frame's header and body; payload i is written as `payloadHeaders[8*i..]`
/// followed by `payloads[i]`'s bytes, which are not copied.
struct EncodedMessage {
  std::string control;
  std::string payloadHeaders;
  std::vector<Buffer> payloads;
  std::shared_ptr<const void> credit; ///< the message's, held until written
  size_t totalBytes() const;
};

/// What encodeMessage would refuse about `message` (ok when nothing), found
/// before it is queued, so that a caller can fail a call or turn a reply into
/// an error instead of the link dropping it: a link logs and drops messages
/// it cannot encode, which for a reply leaves its caller waiting.
Status checkEncodable(const Message &message, const FrameLimits &limits = {});

/// Fills in `payload_sizes` and serializes; fails for oversized parts.
Expected<EncodedMessage> encodeMessage(Message message,
                                       const FrameLimits &limits = {});
/// A control frame holding any protobuf (used for the handshake).
std::string encodeControlFrame(const google::protobuf::MessageLite &body);

} // namespace monarch::transport

#endif // MONARCH_RUNTIME_TRANSPORT_FRAME_H
