//===- Gloo.cpp - The Gloo collective backend (CPU tensors) ---------------===//
//
// One gloo::rendezvous::Context per communicator, connected through the
// engine's Store (via a prefix unique to the communicator) over a shared TCP
// device. Gloo reports errors by throwing; they become Status here.
//
//===----------------------------------------------------------------------===//

#include "monarch/tensor/Collectives.h"

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/alltoall.h>
#include <gloo/broadcast.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/tcp/address.h>
#include <gloo/types.h>

#include <algorithm>
#include <cstdlib>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <cstring>
#include <stdexcept>

namespace monarch::tensor {

namespace {

/// Presents a monarch Store to Gloo, which expects exceptions on failure.
class GlooStoreAdapter : public gloo::rendezvous::Store {
public:
  GlooStoreAdapter(std::shared_ptr<monarch::tensor::Store> store,
                   std::chrono::milliseconds timeout)
      : store(std::move(store)), timeout(timeout) {}

  void set(const std::string &key, const std::vector<char> &data) override {
    if (Status s = store->set(key, data); !s.isOk())
      throw std::runtime_error(s.message());
  }
  std::vector<char> get(const std::string &key) override {
    auto v = store->get(key, timeout);
    if (!v.ok())
      throw std::runtime_error(v.status().message());
    return std::move(v).value();
  }
  void wait(const std::vector<std::string> &keys) override {
    wait(keys, timeout);
  }
  void wait(const std::vector<std::string> &keys,
            const std::chrono::milliseconds &limit) override {
    for (const auto &k : keys)
      if (auto v = store->get(k, limit); !v.ok())
        throw std::runtime_error(v.status().message());
  }

private:
  std::shared_ptr<monarch::tensor::Store> store;
  std::chrono::milliseconds timeout;
};

/// The store of one rendezvous: waits in short slices and gives up as soon
/// as one of the communicator's members is known failed, instead of waiting
/// the whole timeout for a key a dead process will never set.
class RendezvousStore : public gloo::rendezvous::Store {
public:
  RendezvousStore(gloo::rendezvous::Store &inner,
                  std::chrono::milliseconds timeout, const PeerHealth *health,
                  const std::vector<int64_t> &ranks)
      : inner(inner), timeout(timeout), health(health), ranks(ranks) {}

  void set(const std::string &key, const std::vector<char> &data) override {
    inner.set(key, data);
  }
  std::vector<char> get(const std::string &key) override {
    wait({key}, timeout);
    return inner.get(key);
  }
  void wait(const std::vector<std::string> &keys) override {
    wait(keys, timeout);
  }
  /// Gloo passes its context's timeout, which connect() keeps short for
  /// the pairs' connect phase; waiting for a member to arrive gets the
  /// whole rendezvous timeout (a member may be slow or stalled and back).
  void wait(const std::vector<std::string> &keys,
            const std::chrono::milliseconds &) override {
    if (!health)
      return inner.wait(keys, timeout);
    constexpr std::chrono::milliseconds kSlice{200};
    auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      if (auto failed = health->firstFailed(ranks))
        throw std::runtime_error("member rank " +
                                 std::to_string(failed->first) +
                                 " failed: " + failed->second);
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left <= kSlice)
        return inner.wait(keys, std::max(left, std::chrono::milliseconds(1)));
      try {
        return inner.wait(keys, kSlice);
      } catch (const std::exception &) {
        // Not there yet: look at the members again, then wait on.
      }
    }
  }

private:
  gloo::rendezvous::Store &inner;
  std::chrono::milliseconds timeout;
  const PeerHealth *health;
  std::vector<int64_t> ranks;
};

using ReduceFn = void (*)(void *, const void *, const void *, size_t);

template <typename T> ReduceFn reduceFn(ReduceKind kind) {
  switch (kind) {
  case ReduceKind::Sum:
    return &gloo::sum<T>;
  case ReduceKind::Product:
    return &gloo::product<T>;
  case ReduceKind::Min:
    return &gloo::min<T>;
  case ReduceKind::Max:
    return &gloo::max<T>;
  }
  return nullptr;
}

template <typename Fn> Status guarded(const char *what, Fn &&fn) {
  try {
    fn();
    return Status();
  } catch (const std::exception &e) {
    return Status(ErrorCode::Internal,
                  std::string("gloo ") + what + ": " + e.what());
  }
}

bool sameEndpoint(const sockaddr_storage &a, const sockaddr_storage &b) {
  if (a.ss_family != b.ss_family)
    return false;
  if (a.ss_family == AF_INET) {
    const auto &x = reinterpret_cast<const sockaddr_in &>(a);
    const auto &y = reinterpret_cast<const sockaddr_in &>(b);
    return x.sin_port == y.sin_port && x.sin_addr.s_addr == y.sin_addr.s_addr;
  }
  if (a.ss_family == AF_INET6) {
    const auto &x = reinterpret_cast<const sockaddr_in6 &>(a);
    const auto &y = reinterpret_cast<const sockaddr_in6 &>(b);
    return x.sin6_port == y.sin6_port &&
           std::memcmp(&x.sin6_addr, &y.sin6_addr, sizeof(x.sin6_addr)) == 0;
  }
  return false;
}

/// Shuts down the reading side of this process's sockets whose local
/// address is one of `addresses` (a connected Gloo pair's own address names
/// its socket: the pair's listening socket is closed once it accepted).
/// Gloo keeps the descriptors private; the process's descriptor table is
/// where they are. Reading only: a read then returns the end (what a dead
/// peer looks like), while a write Gloo makes meanwhile still goes out --
/// shutting down the writing side too made such a write raise SIGPIPE,
/// which killed the process.
void shutdownSocketsBoundTo(const std::vector<sockaddr_storage> &addresses) {
  if (addresses.empty())
    return;
  DIR *dir = ::opendir("/proc/self/fd");
  if (!dir)
    return;
  while (dirent *e = ::readdir(dir)) {
    char *end = nullptr;
    long fd = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || fd == ::dirfd(dir))
      continue;
    struct stat st;
    if (::fstat(static_cast<int>(fd), &st) != 0 || !S_ISSOCK(st.st_mode))
      continue;
    sockaddr_storage local{};
    socklen_t len = sizeof(local);
    if (::getsockname(static_cast<int>(fd), reinterpret_cast<sockaddr *>(&local),
                      &len) != 0)
      continue;
    for (const auto &a : addresses)
      if (sameEndpoint(local, a)) {
        ::shutdown(static_cast<int>(fd), SHUT_RD);
        break;
      }
  }
  ::closedir(dir);
}

class GlooCommunicator : public Communicator {
public:
  GlooCommunicator(std::shared_ptr<gloo::Context> context,
                   std::chrono::milliseconds timeout)
      : ctx(std::move(context)), timeout(timeout) {}

  int rank() const override { return ctx->rank; }
  int size() const override { return ctx->size; }

  /// Breaks every pair's connection, so that an operation waiting on any
  /// of them fails at once, and every later one too. Closing the pairs
  /// (Context::closeConnections) would not wake it: a closed pair neither
  /// signals the buffers waiting on it nor sees the peer's end any more,
  /// so a waiting allreduce would sleep to its timeout. A socket shut down
  /// for reading is what a dead peer looks like to Gloo's event loop: it
  /// reads the end and fails the pair, waking its waiters with an error.
  void abort() override {
    std::vector<sockaddr_storage> mine;
    for (int i = 0; i < ctx->size; ++i) {
      if (i == ctx->rank)
        continue;
      try {
        if (auto *a = dynamic_cast<const gloo::transport::tcp::Address *>(
                &ctx->getPair(i)->address()))
          mine.push_back(a->getSockaddr());
      } catch (const std::exception &) {
        // No such pair (never connected): nothing waits on it.
      }
    }
    shutdownSocketsBoundTo(mine);
  }

  Status allreduce(Buffer b, ReduceKind kind) override {
    if (size() == 1 || b.count == 0)
      return Status();
    switch (b.dtype) {
    case plan::FLOAT32:
      return allreduceAs<float>(b, kind);
    case plan::FLOAT64:
      return allreduceAs<double>(b, kind);
    case plan::INT32:
      return allreduceAs<int32_t>(b, kind);
    case plan::INT64:
      return allreduceAs<int64_t>(b, kind);
    case plan::INT8:
      return allreduceAs<int8_t>(b, kind);
    case plan::UINT8:
      return allreduceAs<uint8_t>(b, kind);
    case plan::FLOAT16:
      return allreduceAs<gloo::float16>(b, kind);
    default:
      return Status(ErrorCode::Invalid, "gloo allreduce: unsupported dtype " +
                                            plan::DType_Name(b.dtype));
    }
  }

  Status reduceScatter(Buffer in, Buffer out, ReduceKind kind) override {
    // Gloo's new-style API has no reduce-scatter: all-reduce a copy and keep
    // this rank's block (twice the traffic of a ring reduce-scatter).
    size_t bytes = in.count * elementSize(in.dtype);
    std::vector<char> scratch(static_cast<const char *>(in.data),
                              static_cast<const char *>(in.data) + bytes);
    Buffer work{scratch.data(), in.count, in.dtype};
    if (Status s = allreduce(work, kind); !s.isOk())
      return s;
    size_t block = out.count * elementSize(out.dtype);
    std::memcpy(out.data, scratch.data() + block * rank(), block);
    return Status();
  }

  Status allgather(Buffer in, Buffer out) override {
    size_t bytes = in.count * elementSize(in.dtype);
    if (size() == 1) {
      std::memcpy(out.data, in.data, bytes);
      return Status();
    }
    return guarded("allgather", [&] {
      gloo::AllgatherOptions opts(ctx);
      opts.setInput(static_cast<char *>(in.data), bytes);
      opts.setOutput(static_cast<char *>(out.data), bytes * size());
      opts.setTag(nextTag());
      opts.setTimeout(timeout);
      gloo::allgather(opts);
    });
  }

  Status alltoall(Buffer in, Buffer out) override {
    size_t bytes = in.count * elementSize(in.dtype);
    if (size() == 1) {
      std::memcpy(out.data, in.data, bytes);
      return Status();
    }
    return guarded("alltoall", [&] {
      gloo::AlltoallOptions opts(ctx);
      opts.setInput(static_cast<char *>(in.data), bytes);
      opts.setOutput(static_cast<char *>(out.data), bytes);
      opts.setTag(nextTag());
      opts.setTimeout(timeout);
      gloo::alltoall(opts);
    });
  }

  Status broadcast(Buffer b, int root) override {
    if (size() == 1)
      return Status();
    return guarded("broadcast", [&] {
      gloo::BroadcastOptions opts(ctx);
      opts.setOutput(static_cast<char *>(b.data),
                     b.count * elementSize(b.dtype));
      opts.setRoot(root);
      opts.setTag(nextTag());
      opts.setTimeout(timeout);
      gloo::broadcast(opts);
    });
  }

  Status sendRecv(const std::vector<PeerBuffer> &sends,
                  const std::vector<PeerBuffer> &recvs, uint64_t tag) override {
    return guarded("send/recv", [&] {
      std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>> in, out;
      for (const auto &r : recvs) {
        in.push_back(ctx->createUnboundBuffer(
            r.buffer.data, r.buffer.count * elementSize(r.buffer.dtype)));
        in.back()->recv(r.peer, tag);
      }
      for (const auto &s : sends) {
        out.push_back(ctx->createUnboundBuffer(
            s.buffer.data, s.buffer.count * elementSize(s.buffer.dtype)));
        out.back()->send(s.peer, tag);
      }
      for (size_t i = 0; i < out.size(); ++i)
        if (!out[i]->waitSend(timeout))
          throw std::runtime_error(
              "send to peer " + std::to_string(sends[i].peer) + " timed out");
      for (size_t i = 0; i < in.size(); ++i)
        if (!in[i]->waitRecv(timeout))
          throw std::runtime_error(
              "recv from peer " + std::to_string(recvs[i].peer) + " timed out");
    });
  }

private:
  template <typename T> Status allreduceAs(Buffer b, ReduceKind kind) {
    return guarded("allreduce", [&] {
      gloo::AllreduceOptions opts(ctx);
      opts.setOutput(static_cast<T *>(b.data), b.count);
      opts.setReduceFunction(reduceFn<T>(kind));
      opts.setTag(nextTag());
      opts.setTimeout(timeout);
      gloo::allreduce(opts);
    });
  }

  uint32_t nextTag() { return tag++; }

  std::shared_ptr<gloo::Context> ctx;
  std::chrono::milliseconds timeout;
  uint32_t tag = 0;
};

/// See GlooBackend::connect.
constexpr std::chrono::milliseconds kConnectTimeout{1000};

class GlooBackend : public CollectiveBackend {
public:
  GlooBackend(std::shared_ptr<Store> store, GlooOptions options)
      : store(std::make_shared<GlooStoreAdapter>(std::move(store),
                                                 options.timeout)),
        options(std::move(options)) {}

  const char *name() const override { return "gloo"; }

  Expected<std::shared_ptr<Communicator>>
  connect(const std::string &key, const std::vector<int64_t> &ranks,
          int64_t self) override {
    Expected<int> member = memberIndex(key, ranks, self);
    if (!member.ok())
      return member.status();
    int index = *member;
    try {
      auto context = std::make_shared<gloo::rendezvous::Context>(
          index, static_cast<int>(ranks.size()));
      if (ranks.size() > 1) {
        RendezvousStore guarded(*store, options.timeout, options.health.get(),
                                ranks);
        gloo::rendezvous::PrefixStore prefixed("monarch/" + key, guarded);
        std::shared_ptr<gloo::transport::Device> dev = device();
        // Connecting the pairs starts once every member has published its
        // address, i.e. is connecting too: it takes milliseconds, unless a
        // member died in between -- then Gloo would wait several times the
        // context's timeout for it. A short bound for this phase (the store
        // waits above keep the full one) ends that wait within seconds.
        context->setTimeout(std::min(options.timeout, kConnectTimeout));
        context->connectFullMesh(prefixed, dev);
        if (options.health)
          if (auto failed = options.health->firstFailed(ranks))
            throw std::runtime_error("member rank " +
                                     std::to_string(failed->first) +
                                     " failed: " + failed->second);
      }
      context->setTimeout(options.timeout);
      return std::shared_ptr<Communicator>(
          std::make_shared<GlooCommunicator>(context, options.timeout));
    } catch (const std::exception &e) {
      return Status(ErrorCode::Internal,
                    "gloo: connecting communicator " + key + ": " + e.what());
    }
  }

private:
  std::shared_ptr<gloo::transport::Device> device() {
    std::call_once(deviceOnce, [&] {
      gloo::transport::tcp::attr attr;
      attr.hostname = options.hostname;
      tcpDevice = gloo::transport::tcp::CreateDevice(attr);
    });
    return tcpDevice;
  }

  std::shared_ptr<GlooStoreAdapter> store;
  GlooOptions options;
  std::once_flag deviceOnce;
  std::shared_ptr<gloo::transport::Device> tcpDevice;
};

} // namespace

std::shared_ptr<CollectiveBackend> makeGlooBackend(std::shared_ptr<Store> store,
                                                   GlooOptions options) {
  return std::make_shared<GlooBackend>(std::move(store), std::move(options));
}

} // namespace monarch::tensor
