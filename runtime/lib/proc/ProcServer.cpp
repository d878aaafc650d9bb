#include "monarch/runtime/proc/ProcServer.h"

#include "monarch/runtime/proc/CastTree.h"
#include "monarch/runtime/proc/LinkWatch.h"
#include "monarch/runtime/proc/ReplyMerger.h"
#include "monarch/runtime/proc/Runtime.h"
#include "monarch/runtime/util/Log.h"

#include <unistd.h>

namespace monarch {

transport::Message procReadyMessage(const proto::Bootstrap &boot, Runtime &rt) {
  transport::Message ready;
  ready.envelope.set_dest_port(boot.ready_port());
  ready.envelope.set_sender(rt.senderId());
  ready.envelope.mutable_ready()->set_rank(boot.rank());
  ready.envelope.mutable_ready()->set_addr(rt.addr());
  ready.envelope.mutable_ready()->set_pid(static_cast<int>(::getpid()));
  return ready;
}

ProcServer::ProcServer(Runtime &rt, std::string procId, uint32_t procRank)
    : rt(rt), procId(std::move(procId)), procRank(procRank),
      childWatch(std::make_shared<LinkWatch>()) {}

void ProcServer::handle(transport::Message &&message) {
  switch (message.envelope.body_case()) {
  case proto::Envelope::kSpawn:
    return spawn(std::move(message));
  case proto::Envelope::kCast:
    return cast(std::move(message));
  case proto::Envelope::kStop:
    return requestStop();
  default:
    log::warning("proc ", procId, ": unexpected message kind ",
                 static_cast<int>(message.envelope.body_case()));
  }
}

void ProcServer::requestStop() {
  std::lock_guard<std::mutex> guard(stopMu);
  stopping = true;
  stopCv.notify_all();
}

bool ProcServer::waitForStop(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(stopMu);
  return stopCv.wait_for(lock, timeout, [&] { return stopping; });
}

void ProcServer::spawn(transport::Message &&message) {
  const auto &req = message.envelope.spawn();
  auto fail = [&](const std::string &why) {
    transport::Message reply;
    uint32_t count =
        req.count() >= 1 && req.count() <= (1u << 20) ? req.count() : 1;
    for (uint32_t i = 0; i < count; ++i) {
      auto *r = reply.envelope.mutable_cast_reply()->add_results();
      r->set_rank(req.proc_index() * count + i);
      r->set_error(why);
    }
    sendToPort(rt, req.reply_to(), std::move(reply));
  };
  const ActorClassInfo *cls = ActorRegistry::instance().find(req.actor_class());
  if (!cls)
    return fail("proc " + procId + " has no actor class '" + req.actor_class() +
                "' (is its library loaded?)");
  if (req.count() == 0 || req.count() > 1u << 20)
    return fail("bad actor count");
  auto mesh = std::make_shared<LocalMesh>();
  mesh->procIndex = req.proc_index();
  mesh->owner = req.owner();
  {
    std::unique_lock<std::shared_mutex> guard(meshesMu);
    if (meshes.count(req.mesh()))
      return fail("actor mesh '" + req.mesh() + "' exists on proc " + procId);
    meshes[req.mesh()] = mesh;
  }
  auto args = std::make_shared<Invocation>();
  args->args = req.args();
  args->payloads = message.payloads;
  // One merged reply to the spawner once every constructor has run.
  auto merger = std::make_shared<ReplyMerger>(rt, req.reply_to(), req.count());
  proto::PortRef owner = req.owner();
  std::string meshName = req.mesh();
  Runtime *runtime = &rt;
  StopObserver onStop = [runtime, owner](const ActorContext &ctx,
                                         const std::string &reason) {
    transport::Message event;
    auto *ev = event.envelope.mutable_supervision();
    ev->set_mesh(ctx.mesh);
    ev->set_rank(ctx.rank);
    ev->set_reason(reason);
    sendToPort(*runtime, owner, std::move(event));
  };
  for (uint32_t i = 0; i < req.count(); ++i) {
    ActorContext ctx;
    ctx.mesh = meshName;
    ctx.rank = req.proc_index() * req.count() + i;
    ctx.procRank = procRank;
    ctx.procId = procId;
    auto cell =
        std::make_shared<ActorCell>(rt.arena(), *cls, ctx, onStop, rt.poller());
    mesh->cells.push_back(cell);
    uint32_t rank = ctx.rank;
    cell->construct(args, [merger, rank](Status status) {
      HandlerResult r;
      r.rank = rank;
      r.status = status;
      r.value.set_null(true);
      merger->addLocal(std::move(r));
    });
  }
}

void ProcServer::cast(transport::Message &&message) {
  const auto &env = message.envelope;
  const auto &c = env.cast();
  std::shared_ptr<LocalMesh> mesh;
  {
    std::shared_lock<std::shared_mutex> guard(meshesMu);
    auto it = meshes.find(c.mesh());
    if (it != meshes.end())
      mesh = it->second;
  }
  // The message is ours: the subtree moves into the children, no copy.
  std::vector<proto::CastTarget> subtree;
  auto *mutableSubtree = message.envelope.mutable_cast()->mutable_subtree();
  subtree.reserve(mutableSubtree->size());
  for (auto &t : *mutableSubtree)
    subtree.push_back(std::move(t));
  auto children =
      splitCastTree(std::move(subtree), c.fanout() ? c.fanout() : 16);
  const auto &here = c.here();
  size_t localCount = here.locals_size();

  std::shared_ptr<ReplyMerger> merger;
  bool mergeChildren = false;
  if (c.reply_mode() == proto::REPLY_MERGED) {
    merger = std::make_shared<ReplyMerger>(rt, c.reply_to(),
                                           localCount + children.size());
    mergeChildren = !children.empty();
  } else if (c.reply_mode() == proto::REPLY_DIRECT && localCount > 0) {
    merger = std::make_shared<ReplyMerger>(rt, c.reply_to(), localCount);
  }
  // Actor ranks are proc_index * (actors per proc) + local index.
  uint32_t perProc = mesh ? static_cast<uint32_t>(mesh->cells.size()) : 0;

  // Forward first, so the subtree starts while local actors run.
  for (auto &child : children) {
    transport::Message fwd;
    fwd.envelope.set_sender(env.sender());
    fwd.envelope.set_seq(child.head.seq());
    auto *fc = fwd.envelope.mutable_cast();
    fc->set_mesh(c.mesh());
    fc->set_endpoint(c.endpoint());
    *fc->mutable_args() = c.args();
    fc->set_reply_mode(c.reply_mode());
    size_t childIndex = 0;
    if (mergeChildren) {
      std::vector<uint32_t> ranks;
      if (perProc > 0) {
        for (uint32_t local : child.head.locals())
          ranks.push_back(child.head.proc_index() * perProc + local);
        for (const auto &t : child.rest)
          for (uint32_t local : t.locals())
            ranks.push_back(t.proc_index() * perProc + local);
      }
      auto [port, index] = merger->openChildPort(std::move(ranks));
      *fc->mutable_reply_to() = std::move(port);
      childIndex = index;
    } else {
      *fc->mutable_reply_to() = c.reply_to();
    }
    fc->set_fanout(c.fanout());
    *fc->mutable_here() = std::move(child.head);
    for (auto &t : child.rest)
      *fc->add_subtree() = std::move(t);
    fwd.payloads = message.payloads;
    fwd.credit = message.credit; // held until written towards the child
    fwd.awaited = c.reply_mode() != proto::REPLY_NONE;
    std::string childAddr = fc->here().addr();
    auto link = rt.link(childAddr);
    if (!link.ok()) {
      log::error("cannot forward cast to ", childAddr, ": ",
                 link.status().toString());
      if (mergeChildren)
        merger->childLost(childIndex, "cannot reach proc at " + childAddr +
                                          ": " + link.status().message());
      continue;
    }
    if (mergeChildren) {
      // If the child's link closes before it replied, its subtree's ranks
      // are reported unreachable instead of holding up the whole merge.
      std::weak_ptr<ReplyMerger> weak = merger;
      std::string lostFrom = procId;
      childWatch->watch(
          *link, weak,
          [weak, childIndex, childAddr, lostFrom](const Status &why) {
            if (auto m = weak.lock())
              m->childLost(childIndex,
                           "proc " + lostFrom + " lost its link to proc at " +
                               childAddr + " (" + why.message() + ")");
          });
    }
    (*link)->send(std::move(fwd));
  }

  if (localCount == 0)
    return;
  // The message is ours: its strings and arguments move, not copy.
  auto call = std::make_shared<Invocation>();
  auto *mutableCast = message.envelope.mutable_cast();
  call->endpoint = std::move(*mutableCast->mutable_endpoint());
  call->args = std::move(*mutableCast->mutable_args());
  call->payloads = std::move(message.payloads);
  call->credit = std::move(message.credit);
  ReplySink sink;
  if (merger)
    sink = [merger](HandlerResult &&r) { merger->addLocal(std::move(r)); };
  for (uint32_t local : here.locals()) {
    if (!mesh || local >= mesh->cells.size()) {
      if (sink) {
        HandlerResult r;
        r.rank = local;
        r.status = Status(ErrorCode::NotFound, "no actor " + c.mesh() + " #" +
                                                   std::to_string(local) +
                                                   " on proc " + procId);
        sink(std::move(r));
      }
      continue;
    }
    mesh->cells[local]->post(call, sink);
  }
}

} // namespace monarch
