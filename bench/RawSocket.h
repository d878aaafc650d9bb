//===- RawSocket.h - Raw socket baselines ----------------------*- C++ -*-===//
//
// The same bytes the runtime puts on the wire, exchanged over a plain socket
// with a forked child: the floor that the runtime's figures are divided by.
//
//===----------------------------------------------------------------------===//
#ifndef MONARCH_BENCH_RAWSOCKET_H
#define MONARCH_BENCH_RAWSOCKET_H

#include <cstddef>

namespace monarch::bench {

enum class RawKind { Unix, Tcp, SocketPairThreads };

/// Mean round trip in microseconds: `request` bytes out, `reply` bytes back.
/// Both sides block in read(), or with `poll` spin on non-blocking reads
/// (yielding the core between tries).
double rawPingPongUs(RawKind kind, size_t request, size_t reply, int iterations,
                     bool poll = false);
/// Messages per second: `count` writes of `bytes` each, one write per message,
/// to a child that reads them all and acknowledges once.
double rawThroughput(RawKind kind, size_t bytes, int count);

} // namespace monarch::bench

#endif // MONARCH_BENCH_RAWSOCKET_H
