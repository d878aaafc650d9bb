//===- Result.cpp - Errors as values for the mesh library -----------------===//

#include "monarch/mesh/Result.h"

namespace monarch::mesh {

const char *errorKindName(ErrorKind kind) {
  switch (kind) {
  case ErrorKind::Index:
    return "IndexError";
  case ErrorKind::Key:
    return "KeyError";
  case ErrorKind::Value:
    return "ValueError";
  case ErrorKind::Type:
    return "TypeError";
  }
  return "Error";
}

} // namespace monarch::mesh
