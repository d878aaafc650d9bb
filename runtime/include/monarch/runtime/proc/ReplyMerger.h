//===- ReplyMerger.h - Merging cast replies on the way up -------*- C++ -*-===//
//
// A proc in a casting tree waits for its local actors' results and for one
// merged reply from each child, then sends a single CastReply upstream. The
// caller therefore receives one reply per first-level hop, not one per actor.
// A child whose link closes before it replied is given up: its subtree's
// ranks are reported unreachable and the rest of the merge still goes up.
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

  /// A port that one child replies to; closed when its reply arrived or
  /// the merge is sent. `ranks` are the actor ranks of the child's subtree.
  /// Returns the port and the child's index for childLost.
  std::pair<proto::PortRef, size_t> openChildPort(std::vector<uint32_t> ranks);
  void addLocal(HandlerResult &&result);
  /// The child cannot reply (its link closed): its ranks are unreachable.
  void childLost(size_t child, const std::string &reason);

private:
  struct Child {
    uint64_t port = 0;
    std::vector<uint32_t> ranks;
    bool done = false;
  };
  void addChild(size_t child, transport::Message &&reply);
  /// Marks child `index` done and hands over its port; null (nothing
  /// changed) when it is unknown or already done. Holds `mu`.
  Child *takeChild(size_t index, uint64_t &port);
  /// Counts one part in; unlocks, closes `closingPort` (0: none), and sends
  /// the merge upstream once every part is in.
  void partDone(std::unique_lock<std::mutex> &lock, uint64_t closingPort);

  Runtime &rt;
  proto::PortRef upstream;
  std::mutex mu;
  size_t remaining;
  std::vector<Child> children;
  transport::Message merged;
};

/// Sends `reply` to `to` (a port on some proc).
void sendToPort(Runtime &rt, const proto::PortRef &to,
                transport::Message &&reply);

} // namespace monarch

#endif // MONARCH_RUNTIME_PROC_REPLYMERGER_H
