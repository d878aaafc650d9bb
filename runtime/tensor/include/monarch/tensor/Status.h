//===- Status.h - Errors as values at the tensor engine's boundaries -*- C++
//-*-//
//
// Exceptions from torch, Gloo or protobuf are caught where they happen (an
// instruction, a collective call, a plan load) and travel as Status or
// Expected<T> from there on; they never cross a thread or a module boundary.
//
//===----------------------------------------------------------------------===//
#ifndef MONARCH_TENSOR_STATUS_H
#define MONARCH_TENSOR_STATUS_H

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace monarch::tensor {

class [[nodiscard]] Status {
public:
  static Status success() { return Status(); }
  static Status error(std::string message) {
    Status s;
    s.failed = true;
    s.text = std::move(message);
    return s;
  }

  bool ok() const { return !failed; }
  explicit operator bool() const { return ok(); }
  const std::string &message() const { return text; }

private:
  bool failed = false;
  std::string text;
};

/// A value or an error message.
template <typename T> class [[nodiscard]] Expected {
public:
  Expected(T value) : state(std::move(value)) {}
  Expected(Status error) : state(std::move(error)) {
    assert(!std::get<Status>(state).ok() && "Expected from a success Status");
  }

  bool ok() const { return std::holds_alternative<T>(state); }
  explicit operator bool() const { return ok(); }
  T &value() & { return std::get<T>(state); }
  T &&value() && { return std::get<T>(std::move(state)); }
  const T &value() const & { return std::get<T>(state); }
  T *operator->() { return &value(); }
  const std::string &message() const {
    return std::get<Status>(state).message();
  }
  Status status() const {
    return ok() ? Status::success() : std::get<Status>(state);
  }

private:
  std::variant<T, Status> state;
};

} // namespace monarch::tensor

#endif // MONARCH_TENSOR_STATUS_H
