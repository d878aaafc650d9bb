//===- OwnedDirs.h - Temporary directories left behind by no exit -*- C++ -*-===//
//
// A controller makes a private directory for its procs' Unix sockets and its
// collectives' rendezvous files. It must not outlive the process, however it
// ends:
//   - normal exit, exit(), a destructor: the owner removes it (and an atexit
//     handler catches processes that skip destructors);
//   - SIGTERM, SIGINT, SIGHUP: installExitCleanup() handles the signals that
//     are at their default disposition (never one a program or Python set),
//     removes every registered directory with async-signal-safe calls only,
//     then re-raises, so the process still dies of the signal;
//   - SIGKILL (nothing runs): the directory's name carries the owner's pid
//     and pid namespace, `monarch-<what>-p<ns>.<pid>-XXXXXX`, and the next
//     monarch process of the same user that makes one removes those whose
//     owner is gone (reapStaleOwnedDirs). A pid still in use, or another pid
//     namespace's directory (a container sharing /tmp), is left alone.
//
//   std::string dir = makeOwnedDir("store");   // registered, 0700
//   ...
//   removeOwnedDir(dir);                        // removed, unregistered
//
// ownedDirTemplate is header-only so that libraries without the runtime
// (monarch::tensor::TempDir) name their directories the same way.
//
//===----------------------------------------------------------------------===//
#ifndef MONARCH_RUNTIME_UTIL_OWNEDDIRS_H
#define MONARCH_RUNTIME_UTIL_OWNEDDIRS_H

#include <cstdint>
#include <cstdlib>
#include <string>

#include <unistd.h>

namespace monarch {

/// This process's pid namespace id (the inode of /proc/self/ns/pid), or 0.
inline uint64_t pidNamespaceId() {
  char link[64];
  ssize_t n = ::readlink("/proc/self/ns/pid", link, sizeof(link) - 1);
  if (n <= 0)
    return 0;
  link[n] = '\0';
  const char *digits = link;
  while (*digits && (*digits < '0' || *digits > '9'))
    ++digits;
  return std::strtoull(digits, nullptr, 10);
}

/// "$TMPDIR/monarch-<what>-p<ns>.<pid>-XXXXXX" for mkdtemp ("monarch-p..."
/// without `what`). A directory that will hold Unix sockets falls back to
/// /tmp when $TMPDIR would make their paths too long (108 bytes); others
/// (a compile's scratch files) stay in $TMPDIR whatever its length.
inline std::string ownedDirTemplate(const std::string &what,
                                    bool holdsSockets = true) {
  const char *base = std::getenv("TMPDIR");
  std::string dir = base && *base ? base : "/tmp";
  std::string name = "monarch-" + (what.empty() ? "" : what + "-") + "p" +
                     std::to_string(pidNamespaceId()) + "." +
                     std::to_string(::getpid()) + "-XXXXXX";
  if (holdsSockets && dir.size() + name.size() > 72)
    dir = "/tmp";
  return dir + "/" + name;
}

/// Makes a directory from ownedDirTemplate(what), mode 0700, registers it
/// for removal on every exit path, and -- the first time -- removes stale
/// ones and installs the signal handlers. Empty on failure.
std::string makeOwnedDir(const std::string &what);
/// Registers a directory made otherwise; it is removed at exit and on the
/// handled signals. At most 64 at once (further ones are only removed by
/// their owner and, after SIGKILL, by the reaper).
void registerOwnedDir(const std::string &path);
/// Removes the tree and unregisters it.
void removeOwnedDir(const std::string &path);
/// Removes a directory tree using only async-signal-safe calls (open,
/// getdents64, unlinkat), symlinks not followed; true when it is gone.
bool removeTreeSafely(const char *path);
/// Removes the owned directories under $TMPDIR and /tmp whose owner (same
/// user, same pid namespace) is no longer running. Returns how many.
int reapStaleOwnedDirs();
/// SIGTERM, SIGINT and SIGHUP, where still at their default, remove the
/// registered directories before the process dies of them. Idempotent.
void installExitCleanup();

} // namespace monarch

#endif // MONARCH_RUNTIME_UTIL_OWNEDDIRS_H
