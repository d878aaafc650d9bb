//===- Result.h - Errors as values for the mesh library ---------*- C++ -*-===//
//
// The mesh library is linked into the MLIR compiler, which is built with
// -fno-exceptions, and into the runtime, which is not. Errors therefore travel
// as values; each carries the Python exception category Monarch raises for it
// so the frontend can re-raise the same type.
//
//===----------------------------------------------------------------------===//
#ifndef MONARCH_MESH_RESULT_H
#define MONARCH_MESH_RESULT_H

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace monarch::mesh {

/// The Python exception type Monarch raises for each kind of mesh error.
enum class ErrorKind {
  Index, ///< IndexError: a coordinate or range out of bounds.
  Key,   ///< KeyError: an unknown dimension name.
  Value, ///< ValueError: sizes that do not divide, duplicate names, ...
  Type,  ///< TypeError: an argument of the wrong kind.
};

const char *errorKindName(ErrorKind kind);

struct MeshError {
  ErrorKind kind;
  std::string message;
};

/// Either a value or a MeshError. Deliberately tiny: C++17 has no
/// std::expected and the compiler half must not throw.
template <typename T> class [[nodiscard]] Result {
public:
  Result(T value) : state(std::move(value)) {}
  Result(MeshError error) : state(std::move(error)) {}

  static Result failure(ErrorKind kind, std::string message) {
    return Result(MeshError{kind, std::move(message)});
  }

  bool ok() const { return std::holds_alternative<T>(state); }
  explicit operator bool() const { return ok(); }

  const T &value() const & {
    assert(ok() && "value() on an error Result");
    return std::get<T>(state);
  }
  T &&value() && {
    assert(ok() && "value() on an error Result");
    return std::get<T>(std::move(state));
  }
  const T &operator*() const & { return value(); }
  const T *operator->() const { return &value(); }

  const MeshError &error() const {
    assert(!ok() && "error() on a successful Result");
    return std::get<MeshError>(state);
  }

private:
  std::variant<T, MeshError> state;
};

} // namespace monarch::mesh

#endif // MONARCH_MESH_RESULT_H
