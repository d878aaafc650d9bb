//===- RdmaHandle.h - The serializable name of a registered buffer -*- C++
//-*-===//
//
// What a reader or writer needs to reach an RDMABuffer: the owner proc's
// address and RDMA service port, the buffer's id and size, and -- when the
// owner registered it with an RDMA NIC -- the device, remote address and
// rkey. Travels in any actor message (ValueCodec) or as bytes (Python
// pickling).
//
//===----------------------------------------------------------------------===//
#ifndef MONARCH_RDMA_RDMAHANDLE_H
#define MONARCH_RDMA_RDMAHANDLE_H

#include "monarch/runtime/actor/Value.h"
#include "monarch/runtime/util/Status.h"

#include <cstdint>
#include <string>

namespace monarch::rdma {

struct RdmaHandle {
  std::string ownerAddr;    ///< channel address of the owner's proc
  uint64_t servicePort = 0; ///< the owner's RDMA service port
  uint64_t bufferId = 0;
  uint64_t size = 0;
  bool writable = true;
  // Set when the owner registered the buffer with an RDMA NIC.
  std::string device;
  uint64_t remoteAddr = 0;
  uint32_t rkey = 0;

  bool hasVerbs() const { return !device.empty(); }
  proto::Value toValue() const;
  static Expected<RdmaHandle> fromValue(const proto::Value &value);
  std::string toBytes() const;
  static Expected<RdmaHandle> fromBytes(const std::string &bytes);
  /// "buffer 3 (4096 bytes) on unix:/tmp/..." for errors.
  std::string describe() const;
};

} // namespace monarch::rdma

namespace monarch {
template <> struct ValueCodec<rdma::RdmaHandle> {
  static void encode(const rdma::RdmaHandle &h, proto::Value &out,
                     PayloadList &) {
    out = h.toValue();
  }
  static rdma::RdmaHandle decode(const proto::Value &in, const PayloadList &) {
    auto h = rdma::RdmaHandle::fromValue(in);
    if (!h.ok())
      throw DecodeError(h.status().message());
    return std::move(*h);
  }
};
} // namespace monarch

#endif // MONARCH_RDMA_RDMAHANDLE_H
