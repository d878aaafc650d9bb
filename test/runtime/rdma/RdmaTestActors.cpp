//===- RdmaTestActors.cpp - Actors owning and reading RDMA buffers --------===//
//
// Loaded into monarch-worker processes by RdmaTcpTest (actorLibraries).
//
//===----------------------------------------------------------------------===//
#include "monarch/rdma/RdmaBuffer.h"
#include "monarch/runtime/Monarch.h"

#include "RdmaTestPattern.h"

#include <csignal>
#include <cstring>
#include <unistd.h>

namespace {

using monarch::rdma::RdmaBuffer;
using monarch::rdma::RdmaHandle;

/// Memory reached only through copies (as a GPU's is): a StagedMemory whose
/// "device" is a vector of the owner.
class VectorStaged final : public monarch::rdma::StagedMemory {
public:
  VectorStaged(std::vector<uint8_t> &device, uint8_t *host)
      : StagedMemory(host, device.size()), device(device) {}

protected:
  monarch::Status copyOut(size_t offset, uint8_t *to, size_t length) override {
    std::memcpy(to, device.data() + offset, length);
    return monarch::Status::ok();
  }
  monarch::Status copyIn(size_t offset, const uint8_t *from,
                         size_t length) override {
    std::memcpy(device.data() + offset, from, length);
    return monarch::Status::ok();
  }

private:
  std::vector<uint8_t> &device;
};

/// Owns one registered buffer filled with the test pattern of a seed.
class RdmaOwner : public monarch::Actor {
public:
  RdmaHandle alloc(int64_t size, int64_t seed) {
    buffer.reset();
    memory.resize(static_cast<size_t>(size));
    monarch::test::fillPattern(memory.data(), memory.size(), seed);
    auto created = RdmaBuffer::create(memory.data(), memory.size());
    if (!created.ok())
      throw std::runtime_error(created.status().toString());
    buffer = std::make_unique<RdmaBuffer>(std::move(*created));
    return buffer->handle();
  }
  /// A buffer over "device" memory holding pattern(seed), registered
  /// through a host copy that starts zeroed (StagedMemory.h).
  RdmaHandle allocStaged(int64_t size, int64_t seed) {
    buffer.reset();
    memory.assign(static_cast<size_t>(size), 0);
    device.resize(static_cast<size_t>(size));
    monarch::test::fillPattern(device.data(), device.size(), seed);
    auto engine = monarch::rdma::RdmaEngine::forProcess();
    if (!engine.ok())
      throw std::runtime_error(engine.status().toString());
    auto created = RdmaBuffer::create(
        *engine, memory.data(), memory.size(), true, {},
        std::make_shared<VectorStaged>(device, memory.data()));
    if (!created.ok())
      throw std::runtime_error(created.status().toString());
    buffer = std::make_unique<RdmaBuffer>(std::move(*created));
    return buffer->handle();
  }
  /// Positions of the staged buffer's "device" memory that differ from
  /// pattern(seed).
  int64_t deviceMismatches(int64_t seed) {
    return static_cast<int64_t>(
        monarch::test::mismatches(device.data(), device.size(), seed));
  }
  /// The buffer's bytes [offset, offset + length).
  monarch::Blob bytes(int64_t offset, int64_t length) {
    return {monarch::transport::Buffer::copyOf(memory.data() + offset,
                                               static_cast<size_t>(length))};
  }
  /// Positions that differ from pattern(seed) outside [skipFrom, skipTo).
  int64_t mismatches(int64_t seed, int64_t skipFrom, int64_t skipTo) {
    using monarch::test::mismatches;
    size_t from = static_cast<size_t>(std::max<int64_t>(skipFrom, 0));
    size_t to =
        std::max(from, std::min(static_cast<size_t>(skipTo), memory.size()));
    return static_cast<int64_t>(
        mismatches(memory.data(), from, seed) +
        mismatches(memory.data() + to, memory.size() - to, seed, to));
  }
  std::string drop() {
    auto s = buffer ? buffer->drop() : monarch::Status::ok();
    return s.toString();
  }
  std::string backend() {
    return monarch::rdma::backendName(
        monarch::rdma::RdmaEngine::processBackend());
  }
  int64_t pid() { return ::getpid(); }
  /// Reads `length` bytes at `offset` of another proc's buffer; returns the
  /// number of bytes that differ from pattern(seed) (or throws).
  int64_t readAndCheck(RdmaHandle handle, int64_t offset, int64_t length,
                       int64_t seed) {
    std::vector<uint8_t> dst(static_cast<size_t>(length));
    auto done = monarch::rdma::readInto(handle, dst.data(), dst.size(),
                                        static_cast<uint64_t>(offset))
                    .get(std::chrono::seconds(30));
    if (!done.ok())
      throw std::runtime_error(done.status().toString());
    return static_cast<int64_t>(monarch::test::mismatches(
        dst.data(), dst.size(), seed, static_cast<size_t>(offset)));
  }

private:
  std::vector<uint8_t> memory;
  std::vector<uint8_t> device; ///< allocStaged's memory behind `memory`
  std::unique_ptr<RdmaBuffer> buffer;
};

const bool registered = monarch::ActorClass<RdmaOwner>("RdmaOwner")
                            .endpoint("alloc", &RdmaOwner::alloc)
                            .endpoint("allocStaged", &RdmaOwner::allocStaged)
                            .endpoint("deviceMismatches",
                                      &RdmaOwner::deviceMismatches)
                            .endpoint("bytes", &RdmaOwner::bytes)
                            .endpoint("mismatches", &RdmaOwner::mismatches)
                            .endpoint("drop", &RdmaOwner::drop)
                            .endpoint("backend", &RdmaOwner::backend)
                            .endpoint("pid", &RdmaOwner::pid)
                            .endpoint("readAndCheck", &RdmaOwner::readAndCheck)
                            .install();

} // namespace
