//===- HostLocal.cpp - Small all-gathers through shared memory on a host --===//
//
// Every to_mesh starts with an all-gather of each member's {error, root
// instruction, device} (Collective.cpp), so that receivers learn what comes
// and every member connects the same communicators. Through Gloo that is a
// TCP exchange with two thread hand-offs on each side (the caller to Gloo's
// loop thread and back), paid by every transfer of a pipeline's step. When
// every member of a communicator runs on this host -- the same boot and the
// same IPC namespace, so the same /dev/shm -- the host-local backend serves
// its all-gathers of at most kPartBytes per member through one shared page:
// each member copies its part into its slot's buffer of the round, publishes
// the round number, and waits (spinning, then sleeping) until every member
// has published it, then reads all parts. Two buffers per slot, by round
// parity: a member writes round r + 1 only after every member published r,
// which each does only after it finished reading round r - 1, so the
// buffer it overwrites is read by no one. Everything else, and larger
// all-gathers, goes to the decorated backend's communicator (Gloo). Every
// member makes the same choice: the identities and whether each member
// mapped the page are exchanged through the store at connect, and the
// choice per call depends only on its size, the same everywhere.
//
//===----------------------------------------------------------------------===//

#include "SharedMemory.h"
#include "monarch/tensor/Collectives.h"
#include "monarch/runtime/util/Polling.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <fstream>
#include <thread>

#include <unistd.h>

namespace monarch::tensor {

namespace {

constexpr size_t kPartBytes = 64;
constexpr size_t kMaxMembers = 256;

struct alignas(64) Slot {
  std::atomic<uint64_t> round; // the last round this member published
  char part[2][kPartBytes];    // by round parity
};

struct Page {
  std::atomic<uint32_t> attached; // members other than 0 that mapped it
  Slot slots[1];                  // one per member (the page is sized so)
};
static_assert(std::atomic<uint64_t>::is_always_lock_free,
              "the page is shared between processes");

size_t pageBytes(size_t members) {
  return sizeof(Page) + (members - 1) * sizeof(Slot);
}

/// This host's boot and this process's IPC namespace: processes with the
/// same identity see the same POSIX shared memory.
std::string hostIdentity() {
  std::string boot;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> boot;
  char ns[128] = {0};
  ssize_t n = ::readlink("/proc/self/ns/ipc", ns, sizeof(ns) - 1);
  if (boot.empty() || n <= 0)
    return ""; // unknown: never host-local
  return boot + "/" + std::string(ns, static_cast<size_t>(n));
}

class HostLocalCommunicator : public ForwardingCommunicator {
public:
  HostLocalCommunicator(std::shared_ptr<Communicator> inner,
                        std::unique_ptr<SharedMemory> memory, int index,
                        size_t members, std::chrono::milliseconds timeout)
      : ForwardingCommunicator(std::move(inner)), memory(std::move(memory)),
        page(static_cast<Page *>(this->memory->address())), index(index),
        members(members), timeout(timeout) {}

  Status allgather(Buffer in, Buffer out) override {
    size_t bytes = in.count * elementSize(in.dtype);
    if (bytes > kPartBytes)
      return inner->allgather(in, out);
    uint64_t r = ++round;
    int parity = static_cast<int>(r % 2);
    Slot &mine = slot(index);
    std::memcpy(mine.part[parity], in.data, bytes);
    mine.round.store(r, std::memory_order_release);
    auto start = std::chrono::steady_clock::now();
    for (size_t m = 0; m < members; ++m) {
      Slot &theirs = slot(m);
      while (theirs.round.load(std::memory_order_acquire) < r) {
        if (aborted.load())
          return Status(ErrorCode::Closed, "host-local all-gather aborted");
        auto waited = std::chrono::steady_clock::now() - start;
        if (waited >= timeout)
          return Status(ErrorCode::Timeout,
                        "host-local all-gather: member " + std::to_string(m) +
                            " did not arrive within the timeout");
        backOff(waited, std::chrono::microseconds(20));
      }
      std::memcpy(static_cast<char *>(out.data) + m * bytes,
                  theirs.part[parity], bytes);
    }
    return Status();
  }

  void abort() override {
    aborted = true;
    inner->abort();
  }

private:
  Slot &slot(size_t m) { return *(&page->slots[0] + m); }

  std::unique_ptr<SharedMemory> memory;
  Page *page;
  int index;
  size_t members;
  std::chrono::milliseconds timeout;
  uint64_t round = 0; // the calls' own sequence: the same on every member
  std::atomic<bool> aborted{false};
};

class HostLocalBackend : public CollectiveBackend {
public:
  HostLocalBackend(std::shared_ptr<CollectiveBackend> inner,
                   std::shared_ptr<Store> store,
                   std::chrono::milliseconds timeout)
      : inner(std::move(inner)), store(std::move(store)), timeout(timeout),
        identity(hostIdentity()) {}
  const char *name() const override { return inner->name(); }

  Expected<std::shared_ptr<Communicator>>
  connect(const std::string &key, const std::vector<int64_t> &ranks,
          int64_t self) override {
    auto comm = inner->connect(key, ranks, self);
    if (!comm.ok() || ranks.size() < 2 || ranks.size() > kMaxMembers)
      return comm;
    Expected<int> member = memberIndex(key, ranks, self);
    if (!member.ok())
      return member.status();
    int index = *member;
    std::string prefix = "monarch/host-local/" + key + "/";
    auto same = everyone(prefix + "host/", index, ranks.size(), identity,
                         [&](const std::string &v) {
                           return !identity.empty() && v == identity;
                         });
    if (!same.ok())
      return same.status();
    if (!*same)
      return comm;
    // Member 0 makes the page; the others map it, and the last to do so
    // unlinks its name.
    size_t bytes = pageBytes(ranks.size());
    Expected<std::unique_ptr<SharedMemory>> memory =
        Status(ErrorCode::Internal, "not mapped");
    if (index == 0) {
      memory = SharedMemory::create("coll", bytes);
      std::string name = memory.ok() ? memory.value()->name() : "";
      if (Status s = store->set(prefix + "page",
                                std::vector<char>(name.begin(), name.end()));
          !s.isOk())
        return s;
    } else {
      auto name = store->get(prefix + "page", timeout);
      if (!name.ok())
        return name.status();
      if (!name.value().empty())
        memory = SharedMemory::open(
            std::string(name.value().begin(), name.value().end()), bytes);
      if (memory.ok()) {
        auto *page = static_cast<Page *>(memory.value()->address());
        if (page->attached.fetch_add(1) + 2 == ranks.size())
          memory.value()->unlink();
      }
    }
    auto mapped = everyone(prefix + "mapped/", index, ranks.size(),
                           memory.ok() ? "1" : "0",
                           [](const std::string &v) { return v == "1"; });
    if (!mapped.ok())
      return mapped.status();
    if (!*mapped)
      return comm; // someone could not: Gloo for all
    return std::shared_ptr<Communicator>(
        std::make_shared<HostLocalCommunicator>(
            std::move(comm).value(), std::move(memory).value(), index,
            ranks.size(), timeout));
  }

private:
  /// Whether `ok` holds for every member's value of `mine`
  /// (gatherThroughStore under `prefix`).
  template <typename Ok>
  Expected<bool> everyone(const std::string &prefix, int index, size_t members,
                          const std::string &mine, Ok ok) {
    auto all = gatherThroughStore(*store, prefix, index, members, mine,
                                  timeout);
    if (!all.ok())
      return all.status();
    return std::all_of(all.value().begin(), all.value().end(), ok);
  }

  std::shared_ptr<CollectiveBackend> inner;
  std::shared_ptr<Store> store;
  std::chrono::milliseconds timeout;
  std::string identity;
};

} // namespace

std::shared_ptr<CollectiveBackend>
makeHostLocalBackend(std::shared_ptr<CollectiveBackend> inner,
                     std::shared_ptr<Store> store,
                     std::chrono::milliseconds timeout) {
  return std::make_shared<HostLocalBackend>(std::move(inner), std::move(store),
                                            timeout);
}

} // namespace monarch::tensor
