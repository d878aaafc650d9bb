//===- Status.h - Errors as values at module boundaries ---------*- C++ -*-===//
//
// Runtime modules return Status / Expected<T> instead of throwing: work hops
// between io threads and TBB tasks, and an exception must never cross them.
// Header-only (target MonarchStatus) so the tensor engine, which does not link
// the actor runtime, uses the same type.
//
//===----------------------------------------------------------------------===//
#ifndef MONARCH_RUNTIME_UTIL_STATUS_H
#define MONARCH_RUNTIME_UTIL_STATUS_H

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace monarch {

enum class ErrorCode {
  Ok,
  Invalid,     ///< bad argument or malformed input
  NotFound,    ///< unknown actor, endpoint, class, address
  Timeout,     ///< a bounded wait ran out
  Closed,      ///< the connection or proc is gone
  Auth,        ///< the peer failed the handshake
  Remote,      ///< an endpoint raised; message carries its text
  Supervision, ///< a proc or actor of the mesh failed
  Internal,
  Exhausted, ///< a bound on procs, memory or descriptors was reached
};

inline const char *errorCodeName(ErrorCode code) {
  switch (code) {
  case ErrorCode::Ok:
    return "Ok";
  case ErrorCode::Invalid:
    return "Invalid";
  case ErrorCode::NotFound:
    return "NotFound";
  case ErrorCode::Timeout:
    return "Timeout";
  case ErrorCode::Closed:
    return "Closed";
  case ErrorCode::Auth:
    return "Auth";
  case ErrorCode::Remote:
    return "Remote";
  case ErrorCode::Supervision:
    return "Supervision";
  case ErrorCode::Internal:
    return "Internal";
  case ErrorCode::Exhausted:
    return "Exhausted";
  }
  return "Unknown";
}

class [[nodiscard]] Status {
public:
  Status() = default;
  Status(ErrorCode code, std::string message)
      : codeValue(code), text(std::move(message)) {}
  static Status ok() { return Status(); }

  bool isOk() const { return codeValue == ErrorCode::Ok; }
  explicit operator bool() const { return isOk(); }
  ErrorCode code() const { return codeValue; }
  const std::string &message() const { return text; }
  /// "Timeout: no reply within 1000 ms".
  std::string toString() const {
    if (isOk())
      return "Ok";
    return std::string(errorCodeName(codeValue)) + ": " + text;
  }

private:
  ErrorCode codeValue = ErrorCode::Ok;
  std::string text;
};

/// A value or a (non-ok) Status.
template <typename T> class [[nodiscard]] Expected {
public:
  Expected(T value) : state(std::move(value)) {}
  Expected(Status error) : state(std::move(error)) {
    assert(!std::get<Status>(state).isOk() && "Expected from an ok Status");
  }

  bool ok() const { return std::holds_alternative<T>(state); }
  explicit operator bool() const { return ok(); }
  T &value() & {
    assert(ok());
    return std::get<T>(state);
  }
  const T &value() const & {
    assert(ok());
    return std::get<T>(state);
  }
  T &&value() && {
    assert(ok());
    return std::get<T>(std::move(state));
  }
  T &operator*() & { return value(); }
  const T &operator*() const & { return value(); }
  T *operator->() { return &value(); }
  const T *operator->() const { return &value(); }
  const Status &status() const {
    static const Status okStatus;
    return ok() ? okStatus : std::get<Status>(state);
  }

private:
  std::variant<T, Status> state;
};

} // namespace monarch

#endif // MONARCH_RUNTIME_UTIL_STATUS_H
