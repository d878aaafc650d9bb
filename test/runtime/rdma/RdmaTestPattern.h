//===- RdmaTestPattern.h - The bytes RDMA test buffers hold -----*- C++ -*-===//
#ifndef MONARCH_TEST_RDMA_RDMATESTPATTERN_H
#define MONARCH_TEST_RDMA_RDMATESTPATTERN_H

#include <cstddef>
#include <cstdint>
#include <vector>

namespace monarch::test {

/// Byte i of a buffer filled with `seed` (differs between neighbours and
/// between seeds, so a misplaced chunk is caught).
inline uint8_t pattern(int64_t seed, size_t i) {
  return static_cast<uint8_t>((i * 131 + static_cast<size_t>(seed) * 7) >> 3 ^
                              (i >> 12));
}

inline std::vector<uint8_t> patterned(size_t size, int64_t seed,
                                      size_t from = 0) {
  std::vector<uint8_t> v(size);
  for (size_t i = 0; i < size; ++i)
    v[i] = pattern(seed, from + i);
  return v;
}

/// Positions of `got` that differ from pattern(seed) starting at `from`.
inline size_t mismatches(const uint8_t *got, size_t size, int64_t seed,
                         size_t from = 0) {
  size_t bad = 0;
  for (size_t i = 0; i < size; ++i)
    bad += got[i] != pattern(seed, from + i);
  return bad;
}

} // namespace monarch::test

#endif // MONARCH_TEST_RDMA_RDMATESTPATTERN_H
