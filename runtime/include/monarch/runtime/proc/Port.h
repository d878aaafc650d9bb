//===- Port.h - Application mailboxes outside actor meshes ------*- C++ -*-===//
//
// A Port receives values sent to its PortRef from any process of the job:
// the controller opens one and hands its ref to actors (as a constructor or
// endpoint argument); their handlers send results back whenever they are
// ready, without a call waiting for them. The tensor workers report fetched
// values this way.
//
//   monarch::Port port(rt, [](monarch::proto::Value &&v,
//                             monarch::PayloadList &&p) { ... });
//   procs.spawn("workers", "Worker", port.ref());
//   // in a handler:  monarch::sendToPort(ref, value, payloads);
//
// Handlers run on the runtime's io loop -- its io thread, or a thread waiting
// in Future::get that borrowed it (IoLoop.h): they must be quick and never
// block (queue the value and return).
//
//===----------------------------------------------------------------------===//
#ifndef MONARCH_RUNTIME_PROC_PORT_H
#define MONARCH_RUNTIME_PROC_PORT_H

#include "monarch/runtime/actor/Value.h"
#include "monarch/runtime/util/Status.h"

#include <functional>

namespace monarch {

class Runtime;

using PortHandler = std::function<void(proto::Value &&, PayloadList &&)>;

/// An open port; closed (later messages dropped) when destroyed.
class Port {
public:
  Port(Runtime &rt, PortHandler handler);
  ~Port();
  Port(const Port &) = delete;
  Port &operator=(const Port &) = delete;

  proto::PortRef ref() const;

private:
  Runtime &rt;
  uint64_t port;
};

/// Sends `value` (and its payload frames) to the port `to` from this
/// process's runtime (Runtime::ofProcess()). Messages from one process to one
/// port arrive in the order sent; an error means the port's process cannot
/// be reached.
Status sendToPort(const proto::PortRef &to, proto::Value value,
                  PayloadList payloads = {});

} // namespace monarch

#endif // MONARCH_RUNTIME_PROC_PORT_H
