//===- FileStore.cpp - A rendezvous store in a shared directory -----------===//

#include "monarch/tensor/Collectives.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <thread>

#include <unistd.h>

namespace monarch::tensor {

FileStore::FileStore(std::string directory) : dir(std::move(directory)) {}

std::string FileStore::pathOf(const std::string &key) const {
  // Keys contain '/' and ':'; keep file names flat and portable.
  std::string name;
  for (char c : key)
    name += (std::isalnum(static_cast<unsigned char>(c)) || c == '-' ||
             c == '_' || c == '.')
                ? c
                : '_';
  // Distinct keys must not collide after escaping.
  std::ostringstream os;
  os << dir << "/" << name << "." << std::hash<std::string>{}(key);
  return os.str();
}

Status FileStore::set(const std::string &key, const std::vector<char> &value) {
  std::string path = pathOf(key);
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out)
      return Status(ErrorCode::Internal, "FileStore: cannot write " + tmp +
                                             ": " + std::strerror(errno));
    out.write(value.data(), static_cast<std::streamsize>(value.size()));
    if (!out)
      return Status(ErrorCode::Internal, "FileStore: short write to " + tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    return Status(ErrorCode::Internal, "FileStore: cannot rename " + tmp +
                                           ": " + std::strerror(errno));
  return Status();
}

Expected<std::vector<char>> FileStore::get(const std::string &key,
                                           std::chrono::milliseconds timeout) {
  std::string path = pathOf(key);
  auto deadline = std::chrono::steady_clock::now() + timeout;
  auto pause = std::chrono::microseconds(50);
  while (true) {
    std::ifstream in(path, std::ios::binary);
    if (in)
      return std::vector<char>(std::istreambuf_iterator<char>(in),
                               std::istreambuf_iterator<char>());
    if (std::chrono::steady_clock::now() >= deadline)
      return Status(ErrorCode::Timeout, "FileStore: timed out after " +
                                            std::to_string(timeout.count()) +
                                            " ms waiting for key '" + key +
                                            "' in " + dir);
    // Polling a file: back off up to 5 ms.
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(5000));
  }
}

void PeerHealth::markFailed(int64_t rank, std::string reason) {
  std::lock_guard<std::mutex> guard(mu);
  if (failed.emplace(rank, std::move(reason)).second)
    failures.fetch_add(1);
}

std::optional<std::pair<int64_t, std::string>>
PeerHealth::firstFailed(const std::vector<int64_t> &ranks) const {
  if (failures.load() == 0)
    return std::nullopt; // the common case takes no lock
  std::lock_guard<std::mutex> guard(mu);
  for (int64_t r : ranks)
    if (auto it = failed.find(r); it != failed.end())
      return *it;
  return std::nullopt;
}

size_t elementSize(plan::DType dtype) {
  switch (dtype) {
  case plan::UINT8:
  case plan::INT8:
  case plan::BOOL:
    return 1;
  case plan::INT16:
  case plan::FLOAT16:
  case plan::BFLOAT16:
    return 2;
  case plan::INT32:
  case plan::FLOAT32:
    return 4;
  case plan::INT64:
  case plan::FLOAT64:
  case plan::COMPLEX64:
    return 8;
  case plan::COMPLEX128:
    return 16;
  default:
    return 0;
  }
}

} // namespace monarch::tensor
