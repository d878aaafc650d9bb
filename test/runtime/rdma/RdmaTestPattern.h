//===- RdmaTestPattern.h - The bytes RDMA test buffers hold -----*- C++ -*-===//
//
// Byte i of a buffer with seed s: a 4 KiB block of pseudo-random bytes (per
// seed) repeated, with the first 8 bytes of every block replaced by the
// block's index mixed with the seed. A chunk written to the wrong place, a
// shifted offset or a stale seed all show as mismatches, and filling and
// checking run at memcpy/memcmp speed (the 1 GiB tests need that).
//
//===----------------------------------------------------------------------===//
#ifndef MONARCH_TEST_RDMA_RDMATESTPATTERN_H
#define MONARCH_TEST_RDMA_RDMATESTPATTERN_H

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

namespace monarch::test {

constexpr size_t kPatternBlock = 4096;

/// Block `index` of the pattern with `seed`.
inline std::array<uint8_t, kPatternBlock> patternBlock(int64_t seed,
                                                       uint64_t index) {
  std::array<uint8_t, kPatternBlock> block;
  uint64_t x = static_cast<uint64_t>(seed) * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < kPatternBlock; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    block[i] = static_cast<uint8_t>(x >> 24);
  }
  uint64_t header = index * 0xD6E8FEB86659FD93ull ^ static_cast<uint64_t>(seed);
  std::memcpy(block.data(), &header, sizeof header);
  return block;
}

/// Writes pattern bytes [from, from + size) of `seed` to `dst`.
inline void fillPattern(uint8_t *dst, size_t size, int64_t seed,
                        size_t from = 0) {
  auto block = patternBlock(seed, 0);
  size_t pos = from;
  while (pos < from + size) {
    uint64_t index = pos / kPatternBlock;
    uint64_t header =
        index * 0xD6E8FEB86659FD93ull ^ static_cast<uint64_t>(seed);
    std::memcpy(block.data(), &header, sizeof header);
    size_t in = pos % kPatternBlock;
    size_t n = std::min(kPatternBlock - in, from + size - pos);
    std::memcpy(dst + (pos - from), block.data() + in, n);
    pos += n;
  }
}

inline std::vector<uint8_t> patterned(size_t size, int64_t seed,
                                      size_t from = 0) {
  std::vector<uint8_t> v(size);
  fillPattern(v.data(), size, seed, from);
  return v;
}

inline uint8_t pattern(int64_t seed, size_t i) {
  uint8_t b;
  fillPattern(&b, 1, seed, i);
  return b;
}

/// Positions of `got` that differ from pattern(seed) starting at `from`.
inline size_t mismatches(const uint8_t *got, size_t size, int64_t seed,
                         size_t from = 0) {
  std::vector<uint8_t> want(std::min<size_t>(size, 1 << 20));
  size_t bad = 0;
  for (size_t done = 0; done < size; done += want.size()) {
    size_t n = std::min(want.size(), size - done);
    fillPattern(want.data(), n, seed, from + done);
    if (std::memcmp(got + done, want.data(), n) == 0)
      continue;
    for (size_t i = 0; i < n; ++i)
      bad += got[done + i] != want[i];
  }
  return bad;
}

} // namespace monarch::test

#endif // MONARCH_TEST_RDMA_RDMATESTPATTERN_H
