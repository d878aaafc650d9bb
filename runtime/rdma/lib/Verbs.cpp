//===- Verbs.cpp - Names of verbs states for errors and logs -------------===//
#include "monarch/rdma/Verbs.h"

namespace monarch::rdma {

const char *qpStateName(QpState state) {
  switch (state) {
  case QpState::Reset:
    return "RESET";
  case QpState::Init:
    return "INIT";
  case QpState::Rtr:
    return "RTR";
  case QpState::Rts:
    return "RTS";
  case QpState::Error:
    return "ERROR";
  }
  return "?";
}

const char *wcStatusName(WcStatus status) {
  switch (status) {
  case WcStatus::Success:
    return "success";
  case WcStatus::LocalProtection:
    return "local protection error";
  case WcStatus::RemoteAccess:
    return "remote access error";
  case WcStatus::RemoteInvalid:
    return "remote invalid request";
  case WcStatus::RetryExceeded:
    return "transport retry counter exceeded";
  case WcStatus::Flushed:
    return "work request flushed";
  case WcStatus::Other:
    return "other error";
  }
  return "?";
}

} // namespace monarch::rdma
