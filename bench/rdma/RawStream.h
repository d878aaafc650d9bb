//===- RawStream.h - A raw TCP loopback stream baseline ---------*- C++ -*-===//
#ifndef MONARCH_BENCH_RDMA_RAWSTREAM_H
#define MONARCH_BENCH_RDMA_RAWSTREAM_H

#include <cstddef>
#include <vector>

namespace monarch::bench {

/// Seconds for each of `reps` transfers of `bytes` from a forked child over
/// a TCP loopback connection into one touched destination buffer: the parent
/// asks with one byte, the child answers with `bytes` written from its own
/// touched buffer, the parent reads straight into place.
std::vector<double> rawTcpStreamSeconds(size_t bytes, int reps);

} // namespace monarch::bench

#endif // MONARCH_BENCH_RDMA_RAWSTREAM_H
