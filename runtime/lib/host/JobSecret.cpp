#include "monarch/runtime/host/JobSecret.h"

#include "monarch/runtime/transport/Auth.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <iostream>
#include <sys/stat.h>
#include <unistd.h>

namespace monarch::host {

namespace {
std::string trim(const std::string &s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  size_t e = s.find_last_not_of(" \t\r\n");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}
} // namespace

std::string newSecretHex() {
  static const char digits[] = "0123456789abcdef";
  std::string raw = transport::randomBytes(transport::kSecretBytes);
  std::string hex;
  for (unsigned char c : raw) {
    hex.push_back(digits[c >> 4]);
    hex.push_back(digits[c & 15]);
  }
  return hex;
}

Expected<std::string> secretFromHex(const std::string &text) {
  std::string hex = trim(text);
  if (hex.size() != 2 * transport::kSecretBytes)
    return Status(
        ErrorCode::Invalid,
        "job secret must be " + std::to_string(2 * transport::kSecretBytes) +
            " hex digits, got " + std::to_string(hex.size()) + " characters");
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9')
      return c - '0';
    if (c >= 'a' && c <= 'f')
      return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
      return c - 'A' + 10;
    return -1;
  };
  std::string raw;
  for (size_t i = 0; i < hex.size(); i += 2) {
    int hi = nibble(hex[i]), lo = nibble(hex[i + 1]);
    if (hi < 0 || lo < 0)
      return Status(ErrorCode::Invalid, "job secret is not hexadecimal");
    raw.push_back(static_cast<char>(hi << 4 | lo));
  }
  return raw;
}

Expected<std::string> readSecret(const std::string &path) {
  if (path == "-") {
    std::string line;
    if (!std::getline(std::cin, line))
      return Status(ErrorCode::Invalid, "no job secret on stdin");
    return secretFromHex(line);
  }
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0)
    return Status(ErrorCode::NotFound, "cannot open secret file " + path +
                                           ": " + std::strerror(errno));
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status(ErrorCode::Invalid,
                  "secret file " + path + " is not a regular file");
  }
  if (st.st_mode & (S_IRWXG | S_IRWXO)) {
    ::close(fd);
    return Status(ErrorCode::Invalid,
                  "secret file " + path +
                      " is readable by others; chmod 600 it");
  }
  std::string text;
  char buf[256];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof(buf))) > 0 && text.size() < 4096)
    text.append(buf, n);
  ::close(fd);
  return secretFromHex(text);
}

Status writeSecretFile(const std::string &path, const std::string &hex) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0)
    return Status(ErrorCode::Internal, "cannot create secret file " + path +
                                           ": " + std::strerror(errno));
  std::string line = hex + "\n";
  bool ok = ::write(fd, line.data(), line.size()) ==
            static_cast<ssize_t>(line.size());
  ::close(fd);
  return ok ? Status::ok()
            : Status(ErrorCode::Internal, "cannot write secret file " + path);
}

} // namespace monarch::host
