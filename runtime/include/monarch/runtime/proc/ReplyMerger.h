//===- ReplyMerger.h - Merging cast replies on the way up -------*- C++ -*-===//
//
// A proc in a casting tree waits for its local actors' results and for one
// merged reply from each child, then sends a single CastReply upstream. The
// caller therefore receives one reply per first-level hop, not one per actor.
//
//===----------------------------------------------------------------------===//
#ifndef MONARCH_RUNTIME_PROC_REPLYMERGER_H
#define MONARCH_RUNTIME_PROC_REPLYMERGER_H

#include "monarch/runtime/actor/ActorCell.h"
#include "monarch/runtime/transport/Message.h"

#include <mutex>

namespace monarch {

class Runtime;

class ReplyMerger : public std::enable_shared_from_this<ReplyMerger> {
public:
  ReplyMerger(Runtime &rt, proto::PortRef upstream, size_t expectedParts);
  ~ReplyMerger();

  /// A port that children reply to; closed when the merge is sent.
  proto::PortRef openChildPort();
  void addLocal(HandlerResult &&result);
  void addChild(transport::Message &&reply);

private:
  void partDone(std::unique_lock<std::mutex> &lock);

  Runtime &rt;
  proto::PortRef upstream;
  std::mutex mu;
  size_t remaining;
  uint64_t childPort = 0;
  transport::Message merged;
};

/// Sends `reply` to `to` (a port on some proc).
void sendToPort(Runtime &rt, const proto::PortRef &to,
                transport::Message &&reply);

} // namespace monarch

#endif // MONARCH_RUNTIME_PROC_REPLYMERGER_H
