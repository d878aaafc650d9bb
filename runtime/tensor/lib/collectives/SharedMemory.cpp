//===- SharedMemory.cpp - A POSIX shared memory object, mapped ------------===//

#include "SharedMemory.h"

#include <atomic>
#include <cerrno>
#include <cstring>
#include <cstdlib>
#include <random>

#include <dirent.h>
#include <signal.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace monarch::tensor {

namespace {

Status posixStatus(const std::string &what) {
  return Status(ErrorCode::Internal,
                "shared memory: " + what + ": " + std::strerror(errno));
}

/// Unlinks /dev/shm/monarch-<purpose>-<pid>-... of processes that are gone
/// (SIGKILLed between making an object and its last user mapping it), as
/// OwnedDirs does for temporary directories: at each create, which is rare
/// (a communicator's or a ring's first use).
void sweepStale() {
  DIR *d = ::opendir("/dev/shm");
  if (!d)
    return;
  while (dirent *e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name.rfind("monarch-", 0) != 0)
      continue;
    size_t a = name.find('-', 8); // after "monarch-<purpose>"
    if (a == std::string::npos)
      continue;
    pid_t pid =
        static_cast<pid_t>(std::strtol(name.c_str() + a + 1, nullptr, 10));
    if (pid > 0 && ::kill(pid, 0) != 0 && errno == ESRCH)
      ::shm_unlink(("/" + name).c_str());
  }
  ::closedir(d);
}

} // namespace

Expected<std::unique_ptr<SharedMemory>>
SharedMemory::create(const std::string &purpose, size_t bytes) {
  sweepStale();
  static std::atomic<uint64_t> counter{0};
  static thread_local std::mt19937_64 random{std::random_device{}()};
  std::string name = "/monarch-" + purpose + "-" + std::to_string(::getpid()) +
                     "-" + std::to_string(counter++) + "-" +
                     std::to_string(random() % 1000000);
  int fd = ::shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0)
    return posixStatus("shm_open " + name);
  std::unique_ptr<SharedMemory> m(new SharedMemory(name, bytes, true));
  if (::ftruncate(fd, static_cast<off_t>(bytes)) != 0) { // zero-filled
    Status s = posixStatus("ftruncate " + name);
    ::close(fd);
    return s;
  }
  if (Status s = m->map(fd); !s.isOk())
    return s;
  return m;
}

Expected<std::unique_ptr<SharedMemory>>
SharedMemory::open(const std::string &name, size_t bytes) {
  int fd = ::shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0)
    return posixStatus("shm_open " + name);
  struct stat st;
  if (::fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) != bytes) {
    ::close(fd);
    return Status(ErrorCode::Internal,
                  "shared memory: " + name + " is not " +
                      std::to_string(bytes) + " bytes");
  }
  std::unique_ptr<SharedMemory> m(new SharedMemory(name, bytes, false));
  if (Status s = m->map(fd); !s.isOk())
    return s;
  return m;
}

SharedMemory::~SharedMemory() {
  if (base)
    ::munmap(base, bytes);
  if (creator)
    unlink();
}

void SharedMemory::unlink() { ::shm_unlink(path.c_str()); }

Status SharedMemory::map(int fd) {
  void *at = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  Status s = at == MAP_FAILED ? posixStatus("mmap " + path) : Status();
  ::close(fd);
  if (at != MAP_FAILED)
    base = at;
  return s;
}

} // namespace monarch::tensor
