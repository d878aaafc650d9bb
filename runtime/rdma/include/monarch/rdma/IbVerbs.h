//===- IbVerbs.h - The Verbs interface over libibverbs ----------*- C++ -*-===//
//
// The real NIC path. Compiled whenever libibverbs-dev is present; on a
// machine without an RDMA device, devices() is simply empty. Nothing of this
// file has run against real hardware yet (docs/rdma.md).
//
//===----------------------------------------------------------------------===//
#ifndef MONARCH_RDMA_IBVERBS_H
#define MONARCH_RDMA_IBVERBS_H

#include "monarch/rdma/Verbs.h"

namespace monarch::rdma {

/// Null when the build has no libibverbs.
std::unique_ptr<VerbsProvider> makeIbVerbsProvider(QpOptions defaults = {});

} // namespace monarch::rdma

#endif // MONARCH_RDMA_IBVERBS_H
