//===- RdmaBenchActors.cpp - The owner side of the RDMA benchmark ---------===//
#include "monarch/rdma/RdmaBuffer.h"
#include "monarch/runtime/Monarch.h"

#include <cstring>

namespace {

/// Holds one registered, touched buffer.
class RdmaBenchOwner : public monarch::Actor {
public:
  monarch::rdma::RdmaHandle alloc(int64_t size) {
    buffer.reset();
    memory.assign(static_cast<size_t>(size), 0x5a);
    auto created =
        monarch::rdma::RdmaBuffer::create(memory.data(), memory.size());
    if (!created.ok())
      throw std::runtime_error(created.status().toString());
    buffer = std::make_unique<monarch::rdma::RdmaBuffer>(std::move(*created));
    return buffer->handle();
  }

private:
  std::vector<uint8_t> memory;
  std::unique_ptr<monarch::rdma::RdmaBuffer> buffer;
};

const bool registered = monarch::ActorClass<RdmaBenchOwner>("RdmaBenchOwner")
                            .endpoint("alloc", &RdmaBenchOwner::alloc)
                            .install();

} // namespace
