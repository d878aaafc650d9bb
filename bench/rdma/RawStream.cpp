//===- RawStream.cpp - A raw TCP loopback stream baseline -----------------===//
#include "RawStream.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

namespace monarch::bench {
namespace {

bool writeAll(int fd, const char *p, size_t n) {
  while (n) {
    ssize_t k = ::write(fd, p, n);
    if (k <= 0)
      return false;
    p += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

bool readAll(int fd, char *p, size_t n) {
  while (n) {
    ssize_t k = ::read(fd, p, n);
    if (k <= 0)
      return false;
    p += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

[[noreturn]] void die(const char *what) {
  std::perror(what);
  std::exit(1);
}

} // namespace

std::vector<double> rawTcpStreamSeconds(size_t bytes, int reps) {
  int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (::bind(listener, reinterpret_cast<sockaddr *>(&addr), len) ||
      ::listen(listener, 1) ||
      ::getsockname(listener, reinterpret_cast<sockaddr *>(&addr), &len))
    die("raw stream listener");
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(listener);
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (::connect(fd, reinterpret_cast<sockaddr *>(&addr), sizeof addr))
      ::_exit(1);
    std::vector<char> src(bytes, 's');
    char ask;
    while (readAll(fd, &ask, 1))
      if (!writeAll(fd, src.data(), bytes))
        break;
    ::_exit(0);
  }
  int fd = ::accept(listener, nullptr, nullptr);
  ::close(listener);
  if (fd < 0)
    die("raw stream accept");
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  std::vector<char> dst(bytes, 'd');
  std::vector<double> out;
  for (int r = 0; r < reps; ++r) {
    auto start = std::chrono::steady_clock::now();
    char ask = 'a';
    if (!writeAll(fd, &ask, 1) || !readAll(fd, dst.data(), bytes))
      die("raw stream transfer");
    out.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count());
  }
  ::close(fd);
  ::waitpid(pid, nullptr, 0);
  return out;
}

} // namespace monarch::bench
