//===- BackendSelection.h - ibverbs, tcp or none ----------------*- C++ -*-===//
//
// MONARCH_RDMA_BACKEND = auto (default) | ibverbs | tcp | none
//   auto:    ibverbs when a device can be opened, else tcp with one warning
//            that names the reason;
//   ibverbs: like auto, but fails when no device can be used;
//   tcp:     never touches a NIC (also MONARCH_RDMA_DISABLE_IBVERBS=1);
//   none:    RDMA is off; creating buffers and transfers fail.
// MONARCH_RDMA_DEVICE picks the device by name (default: the first listed).
//
//===----------------------------------------------------------------------===//
#ifndef MONARCH_RDMA_BACKENDSELECTION_H
#define MONARCH_RDMA_BACKENDSELECTION_H

#include "monarch/rdma/Verbs.h"

#include <functional>
#include <memory>
#include <string>

namespace monarch::rdma {

enum class BackendKind { Ibverbs, Tcp, None };
const char *backendName(BackendKind kind);

struct BackendChoice {
  BackendKind kind = BackendKind::Tcp;
  /// The opened device (ibverbs only).
  std::unique_ptr<VerbsDevice> device;
  /// Why this backend: shown in the fallback warning.
  std::string reason;
  /// True when ibverbs was wanted or possible but is not used.
  bool fellBack = false;
};

using EnvLookup = std::function<const char *(const char *)>;

/// `provider` may be null (built without libibverbs).
Expected<BackendChoice> chooseBackend(VerbsProvider *provider,
                                      const EnvLookup &env);

} // namespace monarch::rdma

#endif // MONARCH_RDMA_BACKENDSELECTION_H
