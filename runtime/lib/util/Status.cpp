#include "monarch/runtime/util/Status.h"

namespace monarch {

const char *errorCodeName(ErrorCode code) {
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
  }
  return "Unknown";
}

std::string Status::toString() const {
  if (isOk())
    return "Ok";
  return std::string(errorCodeName(codeValue)) + ": " + text;
}

} // namespace monarch
