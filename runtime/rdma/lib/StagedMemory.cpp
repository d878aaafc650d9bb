//===- StagedMemory.cpp - Host copies of memory the transport cannot reach -===//
//
// See StagedMemory.h. The CUDA driver API is looked up at run time (dlopen
// of the libcuda.so.1 torch loaded), declared here with the few types it
// needs, so that the RDMA library builds and runs without CUDA.
//
//===----------------------------------------------------------------------===//
#include "monarch/rdma/StagedMemory.h"

#include <dlfcn.h>

#include <cstring>
#include <string>
#include <type_traits>

namespace monarch::rdma {

Status StagedMemory::refresh(size_t offset, size_t length) {
  if (Status s = checkRange(offset, length); !s.isOk())
    return s;
  std::lock_guard<std::mutex> lock(mu);
  return copyOut(offset, host + offset, length);
}

Status StagedMemory::store(size_t offset, const uint8_t *bytes,
                           size_t length) {
  if (Status s = checkRange(offset, length); !s.isOk())
    return s;
  std::lock_guard<std::mutex> lock(mu);
  std::memcpy(host + offset, bytes, length);
  return copyIn(offset, host + offset, length);
}

Status StagedMemory::checkRange(size_t offset, size_t length) const {
  if (offset > size || length > size - offset)
    return Status(ErrorCode::Invalid, "staged range outside the buffer");
  return Status::ok();
}

namespace {

// The driver API's types and the constants used (cuda.h).
using CUresult = int;
using CUdeviceptr = unsigned long long;
using CUcontext = void *;
using CUdevice = int;
constexpr int kPointerMemoryType = 2;    // CU_POINTER_ATTRIBUTE_MEMORY_TYPE
constexpr int kPointerDeviceOrdinal = 9; // CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL
constexpr unsigned kMemoryTypeDevice = 2; // CU_MEMORYTYPE_DEVICE

struct Driver {
  CUresult (*pointerGetAttribute)(void *, int, CUdeviceptr) = nullptr;
  CUresult (*primaryRetain)(CUcontext *, CUdevice) = nullptr;
  CUresult (*primaryRelease)(CUdevice) = nullptr;
  CUresult (*ctxPush)(CUcontext) = nullptr;
  CUresult (*ctxPop)(CUcontext *) = nullptr;
  CUresult (*dtoh)(void *, CUdeviceptr, size_t) = nullptr;
  CUresult (*htod)(CUdeviceptr, const void *, size_t) = nullptr;
  CUresult (*errorString)(CUresult, const char **) = nullptr;
  std::string missing; ///< why it cannot be used; empty when it can

  static const Driver &get() {
    static const Driver d = load();
    return d;
  }

  Status error(CUresult r, const std::string &what) const {
    const char *text = nullptr;
    if (errorString)
      errorString(r, &text);
    return Status(ErrorCode::Internal, what + ": CUDA error " +
                                           std::to_string(r) +
                                           (text ? std::string(" (") + text + ")"
                                                 : std::string()));
  }

private:
  static Driver load() {
    Driver d;
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (!lib)
      lib = dlopen("libcuda.so.1", RTLD_NOW);
    if (!lib) {
      d.missing = "no CUDA driver in this process (libcuda.so.1)";
      return d;
    }
    auto sym = [&](auto &fn, const char *name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(
          dlsym(lib, name));
      if (!fn && d.missing.empty())
        d.missing = std::string("the CUDA driver has no ") + name;
    };
    sym(d.pointerGetAttribute, "cuPointerGetAttribute");
    sym(d.primaryRetain, "cuDevicePrimaryCtxRetain");
    sym(d.primaryRelease, "cuDevicePrimaryCtxRelease_v2");
    sym(d.ctxPush, "cuCtxPushCurrent_v2");
    sym(d.ctxPop, "cuCtxPopCurrent_v2");
    sym(d.dtoh, "cuMemcpyDtoH_v2");
    sym(d.htod, "cuMemcpyHtoD_v2");
    sym(d.errorString, "cuGetErrorString");
    return d;
  }
};

/// Device memory of a GPU whose primary context (the one torch uses) this
/// holds; each copy makes it current on the calling thread (any of the
/// runtime's) for its duration.
class CudaStaged final : public StagedMemory {
public:
  CudaStaged(const Driver &d, CUdeviceptr device, CUdevice gpu, CUcontext ctx,
             uint8_t *host, size_t size)
      : StagedMemory(host, size), d(d), device(device), gpu(gpu), ctx(ctx) {}
  ~CudaStaged() override { d.primaryRelease(gpu); }

protected:
  Status copyOut(size_t offset, uint8_t *to, size_t length) override {
    return inContext("copying GPU memory to its host copy", [&] {
      return d.dtoh(to, device + offset, length);
    });
  }
  Status copyIn(size_t offset, const uint8_t *from, size_t length) override {
    return inContext("copying a write into GPU memory", [&] {
      return d.htod(device + offset, from, length);
    });
  }

private:
  template <typename F> Status inContext(const char *what, F &&copy) {
    if (CUresult r = d.ctxPush(ctx))
      return d.error(r, what);
    CUresult r = copy();
    CUcontext popped = nullptr;
    d.ctxPop(&popped);
    return r ? d.error(r, what) : Status::ok();
  }

  const Driver &d;
  CUdeviceptr device;
  CUdevice gpu;
  CUcontext ctx;
};

} // namespace

Expected<std::shared_ptr<StagedMemory>> cudaStagedMemory(uint64_t device,
                                                         uint8_t *host,
                                                         size_t size) {
  const Driver &d = Driver::get();
  if (!d.missing.empty())
    return Status(ErrorCode::Invalid,
                  "cannot register CUDA memory: " + d.missing);
  if (!host || size == 0)
    return Status(ErrorCode::Invalid, "a staged buffer needs a host copy");
  unsigned type = 0;
  CUresult r = d.pointerGetAttribute(&type, kPointerMemoryType, device);
  if (r || type != kMemoryTypeDevice)
    return Status(ErrorCode::Invalid,
                  "cannot register CUDA memory: address is not device memory");
  // The device's primary context rather than the pointer's own: memory
  // torch maps itself (expandable segments) reports no context.
  CUdevice gpu = 0;
  if ((r = d.pointerGetAttribute(&gpu, kPointerDeviceOrdinal, device)))
    return d.error(r, "cannot register CUDA memory (its device)");
  CUcontext ctx = nullptr;
  if ((r = d.primaryRetain(&ctx, gpu)))
    return d.error(r, "cannot register CUDA memory (its device's context)");
  return std::shared_ptr<StagedMemory>(
      std::make_shared<CudaStaged>(d, device, gpu, ctx, host, size));
}

} // namespace monarch::rdma
