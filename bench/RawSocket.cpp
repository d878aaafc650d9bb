#include "RawSocket.h"

#include <arpa/inet.h>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace monarch::bench {

namespace {

/// With `poll`, reads never block: an empty socket yields the core and
/// tries again, as the runtime's polling threads do.
bool readAll(int fd, char *buf, size_t n, bool poll = false) {
  while (n) {
    ssize_t got = ::recv(fd, buf, n, poll ? MSG_DONTWAIT : 0);
    if (got < 0 && poll && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      std::this_thread::yield();
      continue;
    }
    if (got <= 0)
      return false;
    buf += got;
    n -= got;
  }
  return true;
}

bool writeAll(int fd, const char *buf, size_t n) {
  while (n) {
    ssize_t put = ::write(fd, buf, n);
    if (put <= 0)
      return false;
    buf += put;
    n -= put;
  }
  return true;
}

void noDelay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/// A connected pair: ours, and the peer's (in a child or a thread).
struct Pair {
  int mine = -1;
  int theirs = -1;
};

Pair connectedPair(RawKind kind) {
  Pair p;
  if (kind != RawKind::Tcp) {
    int fds[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0)
      std::abort();
    p.mine = fds[0];
    p.theirs = fds[1];
    return p;
  }
  int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  ::bind(listener, reinterpret_cast<sockaddr *>(&addr), sizeof(addr));
  ::listen(listener, 1);
  ::getsockname(listener, reinterpret_cast<sockaddr *>(&addr), &len);
  p.mine = ::socket(AF_INET, SOCK_STREAM, 0);
  if (::connect(p.mine, reinterpret_cast<sockaddr *>(&addr), sizeof(addr)) != 0)
    std::abort();
  p.theirs = ::accept(listener, nullptr, nullptr);
  ::close(listener);
  noDelay(p.mine);
  noDelay(p.theirs);
  return p;
}

/// Runs `peer(fd)` in a forked child (or a thread) and `self(fd)` here.
template <typename Peer, typename Self>
double withPeer(RawKind kind, Peer peer, Self self) {
  Pair p = connectedPair(kind);
  if (kind == RawKind::SocketPairThreads) {
    std::thread t([&] { peer(p.theirs); });
    double r = self(p.mine);
    t.join();
    ::close(p.mine);
    ::close(p.theirs);
    return r;
  }
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(p.mine);
    peer(p.theirs);
    ::_exit(0);
  }
  ::close(p.theirs);
  double r = self(p.mine);
  ::close(p.mine);
  ::waitpid(pid, nullptr, 0);
  return r;
}

} // namespace

double rawPingPongUs(RawKind kind, size_t request, size_t reply, int iterations,
                     bool poll) {
  return withPeer(
      kind,
      [=](int fd) {
        std::vector<char> in(request), out(reply, 'r');
        for (int i = 0; i < iterations; ++i)
          if (!readAll(fd, in.data(), request, poll) ||
              !writeAll(fd, out.data(), reply))
            return;
      },
      [=](int fd) {
        std::vector<char> out(request, 'q'), in(reply);
        auto start = std::chrono::steady_clock::now();
        for (int i = 0; i < iterations; ++i) {
          writeAll(fd, out.data(), request);
          readAll(fd, in.data(), reply, poll);
        }
        std::chrono::duration<double, std::micro> took =
            std::chrono::steady_clock::now() - start;
        return took.count() / iterations;
      });
}

double rawThroughput(RawKind kind, size_t bytes, int count) {
  return withPeer(
      kind,
      [=](int fd) {
        std::vector<char> buf(1 << 16);
        size_t left = bytes * count;
        while (left) {
          ssize_t got = ::read(fd, buf.data(), std::min(buf.size(), left));
          if (got <= 0)
            return;
          left -= got;
        }
        char ack = 'a';
        writeAll(fd, &ack, 1);
      },
      [=](int fd) {
        std::vector<char> msg(bytes, 'm');
        auto start = std::chrono::steady_clock::now();
        for (int i = 0; i < count; ++i)
          writeAll(fd, msg.data(), bytes);
        char ack;
        readAll(fd, &ack, 1);
        std::chrono::duration<double> took =
            std::chrono::steady_clock::now() - start;
        return count / took.count();
      });
}

} // namespace monarch::bench
