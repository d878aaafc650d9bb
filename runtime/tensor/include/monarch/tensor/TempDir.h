//===- TempDir.h - A temporary directory, removed on exit ------*- C++ -*-===//
//
// Used for FileStore rendezvous directories and plan files of multi-process
// runs. Removal walks the tree with nftw rather than std::filesystem::
// remove_all: torch 2.x's libtorch.so exports its own std::filesystem
// symbols, which interpose on libstdc++'s and crash when called (seen with
// torch 2.11 on the GPU machine).
//
//===----------------------------------------------------------------------===//
#ifndef MONARCH_TENSOR_TEMPDIR_H
#define MONARCH_TENSOR_TEMPDIR_H

#include <string>

namespace monarch::tensor {

class TempDir {
public:
  /// Creates `$TMPDIR/monarch-<prefix>-p<ns>.<pid>-XXXXXX` (mode 0700;
  /// the name lets the next monarch process remove it if this one is
  /// SIGKILLed, monarch/runtime/util/OwnedDirs.h); aborts the process with a
  /// message if that is impossible, since nothing can run without it.
  explicit TempDir(const std::string &prefix);
  /// `parent/<prefix>-XXXXXX`: inside a directory already cleaned up on
  /// every exit (the runtime's private one).
  TempDir(const std::string &prefix, const std::string &parent);
  ~TempDir();
  TempDir(const TempDir &) = delete;
  TempDir &operator=(const TempDir &) = delete;

  const std::string &path() const { return dir; }
  /// `path() + "/" + name`.
  std::string file(const std::string &name) const { return dir + "/" + name; }

private:
  std::string dir;
};

/// Removes a directory tree; true on success (also when it did not exist).
bool removeTree(const std::string &path);

} // namespace monarch::tensor

#endif // MONARCH_TENSOR_TEMPDIR_H
