//===- OwnedDirs.cpp - Temporary directories left behind by no exit -------===//

#include "monarch/runtime/util/OwnedDirs.h"

#include "monarch/runtime/util/Log.h"

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <mutex>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <vector>

namespace monarch {

namespace {

/// Registered directories, readable from a signal handler: fixed slots, a
/// path written before its slot is marked ready (release), read after the
/// handler sees it ready (acquire).
struct Slot {
  std::atomic<bool> taken{false};
  std::atomic<bool> ready{false};
  char path[256];
};
constexpr int kSlots = 64;
Slot slots[kSlots];

/// getdents64's record (not in glibc's headers).
struct LinuxDirent64 {
  uint64_t ino;
  int64_t off;
  unsigned short reclen;
  unsigned char type;
  char name[];
};

/// Empties and removes `name` in `parent` (AT_FDCWD for a path). Only
/// async-signal-safe calls; bounded depth (the directories are flat).
bool removeAt(int parent, const char *name, int depth) {
  if (::unlinkat(parent, name, 0) == 0 || errno == ENOENT)
    return true;
  if (depth > 8 || (errno != EISDIR && errno != EPERM))
    return false;
  int fd = ::openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
                                      O_CLOEXEC);
  if (fd < 0)
    return errno == ENOENT;
  alignas(8) char buf[4096];
  for (;;) {
    long n = ::syscall(SYS_getdents64, fd, buf, sizeof(buf));
    if (n <= 0)
      break;
    for (long at = 0; at < n;) {
      auto *d = reinterpret_cast<LinuxDirent64 *>(buf + at);
      at += d->reclen;
      if (std::strcmp(d->name, ".") == 0 || std::strcmp(d->name, "..") == 0)
        continue;
      removeAt(fd, d->name, depth + 1);
    }
  }
  ::close(fd);
  return ::unlinkat(parent, name, AT_REMOVEDIR) == 0 || errno == ENOENT;
}

void removeRegistered() {
  for (auto &slot : slots)
    if (slot.ready.load(std::memory_order_acquire))
      removeTreeSafely(slot.path);
}

constexpr int kSignals[] = {SIGTERM, SIGINT, SIGHUP};

void onFatalSignal(int sig) {
  int saved = errno;
  removeRegistered();
  // Die of the signal itself, as without this handler.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  ::sigaction(sig, &dfl, nullptr);
  errno = saved;
  ::raise(sig);
}

/// "<...>-p<ns>.<pid>-<6 chars>": the owner's namespace and pid, if the
/// name is one of ours.
bool parseOwner(const char *name, uint64_t &ns, long &pid) {
  if (std::strncmp(name, "monarch-", 8) != 0)
    return false;
  for (const char *p = std::strstr(name, "-p"); p;
       p = std::strstr(p + 1, "-p")) {
    char *end = nullptr;
    errno = 0;
    uint64_t n = std::strtoull(p + 2, &end, 10);
    if (errno || end == p + 2 || *end != '.')
      continue;
    char *pidEnd = nullptr;
    long owner = std::strtol(end + 1, &pidEnd, 10);
    if (pidEnd == end + 1 || *pidEnd != '-' || std::strlen(pidEnd) != 7)
      continue;
    ns = n;
    pid = owner;
    return true;
  }
  return false;
}

int reapIn(const std::string &base) {
  DIR *dir = ::opendir(base.c_str());
  if (!dir)
    return 0;
  uint64_t myNs = pidNamespaceId();
  std::vector<std::string> stale;
  while (dirent *e = ::readdir(dir)) {
    uint64_t ns = 0;
    long pid = 0;
    if (!parseOwner(e->d_name, ns, pid) || ns != myNs || pid == ::getpid() ||
        pid <= 0)
      continue;
    struct stat st {};
    std::string path = base + "/" + e->d_name;
    if (::lstat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) ||
        st.st_uid != ::getuid())
      continue;
    if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH)
      continue; // running (or not ours to signal): not stale
    stale.push_back(path);
  }
  ::closedir(dir);
  int removed = 0;
  for (const auto &path : stale)
    if (removeTreeSafely(path.c_str())) {
      log::debug("removed ", path, ", left by a process that is gone");
      ++removed;
    }
  return removed;
}

} // namespace

bool removeTreeSafely(const char *path) {
  return removeAt(AT_FDCWD, path, 0);
}

void registerOwnedDir(const std::string &path) {
  if (path.empty() || path.size() >= sizeof(Slot::path))
    return;
  for (auto &slot : slots) {
    bool expected = false;
    if (!slot.taken.compare_exchange_strong(expected, true))
      continue;
    std::memcpy(slot.path, path.c_str(), path.size() + 1);
    slot.ready.store(true, std::memory_order_release);
    return;
  }
  log::debug("more than ", kSlots, " owned directories; ", path,
             " is removed by its owner only");
}

void removeOwnedDir(const std::string &path) {
  for (auto &slot : slots)
    if (slot.ready.load(std::memory_order_acquire) && path == slot.path) {
      slot.ready.store(false, std::memory_order_release);
      slot.taken.store(false, std::memory_order_release);
    }
  if (!path.empty())
    removeTreeSafely(path.c_str());
}

int reapStaleOwnedDirs() {
  const char *base = std::getenv("TMPDIR");
  int removed = 0;
  if (base && *base && std::string(base) != "/tmp")
    removed += reapIn(base);
  removed += reapIn("/tmp");
  return removed;
}

void installExitCleanup() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (int sig : kSignals) {
      struct sigaction current {};
      if (::sigaction(sig, nullptr, &current) != 0 ||
          current.sa_handler != SIG_DFL || (current.sa_flags & SA_SIGINFO))
        continue; // the program (or Python) handles it: theirs to clean up
      struct sigaction ours {};
      ours.sa_handler = onFatalSignal;
      sigemptyset(&ours.sa_mask);
      ::sigaction(sig, &ours, nullptr);
    }
    std::atexit(removeRegistered);
  });
}

std::string makeOwnedDir(const std::string &what) {
  static std::once_flag reaped;
  std::call_once(reaped, [] { reapStaleOwnedDirs(); });
  installExitCleanup();
  std::string pattern = ownedDirTemplate(what);
  std::vector<char> buf(pattern.begin(), pattern.end());
  buf.push_back('\0');
  if (!::mkdtemp(buf.data()))
    return "";
  std::string dir = buf.data();
  registerOwnedDir(dir);
  return dir;
}

} // namespace monarch
