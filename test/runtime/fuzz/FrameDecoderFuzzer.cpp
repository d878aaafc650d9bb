//===- FrameDecoderFuzzer.cpp - libFuzzer target for the frame decoder ----===//
//
// Feeds arbitrary bytes, split into arbitrary chunks, to the decoder that
// every socket connection runs (first the handshake, then messages). The
// decoder must never crash, read out of bounds or allocate beyond its limits;
// errors are values.
//
//===----------------------------------------------------------------------===//
#include "monarch/runtime/transport/FrameDecoder.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>

using namespace monarch::transport;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0)
    return 0;
  FrameLimits limits;
  limits.maxControlBytes = 1 << 16;
  limits.maxPayloadBytes = 1 << 20;
  limits.maxPayloadsPerMessage = 64;
  FrameDecoder decoder(limits);
  // The first byte picks the chunking and whether a handshake comes first.
  size_t chunk = data[0] % 31 + 1;
  bool handshake = data[0] & 0x80;
  for (size_t at = 1; at < size; at += chunk) {
    decoder.feed(data + at, std::min(chunk, size - at));
    for (;;) {
      if (handshake) {
        auto h = decoder.nextControl<monarch::proto::Handshake>();
        if (!h.ok())
          return 0;
        if (!h->has_value())
          break;
        handshake = false;
        continue;
      }
      auto m = decoder.nextMessage();
      if (!m.ok())
        return 0;
      if (!m->has_value())
        break;
      // Touch what a receiver reads.
      const auto &message = **m;
      size_t sum = message.envelope.sender().size();
      for (const auto &p : message.payloads)
        sum += p.size() ? p.data()[p.size() - 1] : 0;
      if (sum == SIZE_MAX)
        return 1;
    }
  }
  return 0;
}
