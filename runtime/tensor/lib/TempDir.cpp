//===- TempDir.cpp - A private temporary directory ------------------------===//

#include "monarch/tensor/TempDir.h"

#include "monarch/runtime/util/OwnedDirs.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ftw.h>
#include <unistd.h>
#include <vector>

namespace monarch::tensor {

namespace {
std::string makeDir(const std::string &pattern) {
  std::vector<char> buffer(pattern.begin(), pattern.end());
  buffer.push_back('\0');
  if (!::mkdtemp(buffer.data())) {
    std::fprintf(stderr, "monarch: cannot create a directory like %s: %s\n",
                 pattern.c_str(), std::strerror(errno));
    std::abort();
  }
  return buffer.data();
}
} // namespace

TempDir::TempDir(const std::string &prefix)
    : dir(makeDir(ownedDirTemplate(prefix, /*holdsSockets=*/false))) {}

TempDir::TempDir(const std::string &prefix, const std::string &parent)
    : dir(makeDir(parent + "/" + prefix + "-XXXXXX")) {}

TempDir::~TempDir() { removeTree(dir); }

bool removeTree(const std::string &path) {
  auto removeOne = [](const char *entry, const struct stat *, int,
                      struct FTW *) { return ::remove(entry); };
  int rc =
      ::nftw(path.c_str(), removeOne, /*nopenfd=*/16, FTW_DEPTH | FTW_PHYS);
  return rc == 0 || errno == ENOENT;
}

} // namespace monarch::tensor
