//===- MemoryCap.cpp - A per-process cap on CPU tensor memory -------------===//
//
// Wraps c10's CPU allocator: every allocation is counted, and one that would
// take live bytes past the cap throws, which fails the allocating instruction
// like any other ATen error (so a program can probe for the largest size that
// fits without killing the worker).
//
//===----------------------------------------------------------------------===//

#include "Internal.h"

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <torch/version.h>

#include <atomic>
#include <cstring>
#include <stdexcept>

#if TORCH_VERSION_MAJOR > 2 ||                                                 \
    (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 3)
#define MONARCH_ALLOCATE_CONST
#define MONARCH_ALLOCATOR_HAS_COPY_DATA 1
#else
#define MONARCH_ALLOCATE_CONST const
#endif

namespace monarch::tensor::detail {

namespace {

std::atomic<size_t> capBytes{0};
std::atomic<size_t> liveBytes{0};

class CappedCpuAllocator final : public c10::Allocator {
public:
  explicit CappedCpuAllocator(c10::Allocator *inner) : inner(inner) {}

  c10::DataPtr allocate(size_t n) MONARCH_ALLOCATE_CONST override {
    size_t cap = capBytes.load(std::memory_order_relaxed);
    size_t after = liveBytes.fetch_add(n) + n;
    if (cap != 0 && after > cap) {
      liveBytes.fetch_sub(n);
      throw std::runtime_error("memory cap exceeded: allocating " +
                               std::to_string(n) + " bytes with " +
                               std::to_string(after - n) +
                               " in use would pass the worker's cap of " +
                               std::to_string(cap) + " bytes");
    }
    c10::DataPtr base;
    try {
      base = inner->allocate(n);
    } catch (...) {
      liveBytes.fetch_sub(n);
      throw;
    }
    void *data = base.get();
    c10::Device device = base.device();
    auto *owner = new Allocation{std::move(base), n};
    return c10::DataPtr(data, owner, &release, device);
  }

  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }

#ifdef MONARCH_ALLOCATOR_HAS_COPY_DATA
  void copy_data(void *dest, const void *src,
                 std::size_t count) const override {
    std::memcpy(dest, src, count);
  }
#endif

private:
  struct Allocation {
    c10::DataPtr base;
    size_t bytes;
  };
  static void release(void *ctx) {
    auto *a = static_cast<Allocation *>(ctx);
    liveBytes.fetch_sub(a->bytes);
    delete a;
  }

  c10::Allocator *inner;
};

} // namespace

void setMemoryCap(size_t bytes) {
  static std::once_flag installed;
  if (bytes != 0)
    std::call_once(installed, [] {
      static CappedCpuAllocator allocator(c10::GetCPUAllocator());
      c10::SetCPUAllocator(&allocator, /*priority=*/100);
    });
  capBytes.store(bytes);
}

size_t memoryInUse() { return liveBytes.load(); }

} // namespace monarch::tensor::detail
