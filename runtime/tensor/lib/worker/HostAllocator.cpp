//===- HostAllocator.cpp - glibc malloc settings of a tensor worker -------===//
//
// TensorWorker.h tuneHostAllocator(). A worker allocates and frees one host
// tensor per op (40 KB for a 100x100 float). Its executor threads use
// glibc's per-thread arenas, which give the free top of a heap back to the
// kernel as soon as it passes the trim threshold (128 KB), and big blocks
// are mmapped afresh until the dynamic mmap threshold has grown: the next
// op faults the same pages in again. On the 2-core development machine that
// was a fifth of a worker's time in an eager chain (clear_page, page
// faults, unmap), taken from the controller's core. Here freed memory is
// kept for reuse -- up to 256 MB of free top per arena, blocks up to 32 MB
// from the heap -- which is what torch's own CUDA caching allocator does
// for device memory. glibc's own variables (MALLOC_TRIM_THRESHOLD_,
// MALLOC_MMAP_THRESHOLD_, MALLOC_TOP_PAD_) still decide when set.
//
//===----------------------------------------------------------------------===//

#include "monarch/tensor/TensorWorker.h"

#include <cstdlib>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace monarch::tensor {

void tuneHostAllocator() {
#if defined(__GLIBC__)
  if (!std::getenv("MALLOC_MMAP_THRESHOLD_"))
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
  if (!std::getenv("MALLOC_TRIM_THRESHOLD_"))
    mallopt(M_TRIM_THRESHOLD, 256 << 20);
  if (!std::getenv("MALLOC_TOP_PAD_"))
    mallopt(M_TOP_PAD, 16 << 20);
#endif
}

} // namespace monarch::tensor
