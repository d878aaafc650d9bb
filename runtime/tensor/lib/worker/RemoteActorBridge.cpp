//===- RemoteActorBridge.cpp - rref from a native tensor worker -----------===//

#include "RemoteActorBridge.h"

#include "../Internal.h"

#include "monarch/runtime/proc/AttachedProcs.h"
#include "monarch/runtime/proc/Runtime.h"

#include <stdexcept>

namespace monarch::tensor {
namespace {

/// The endpoint arguments as plan values: tensors become host copies, their
/// device types listed in order in `devices`.
void encodeArg(const c10::IValue &v, plan::Value *out,
               google::protobuf::RepeatedPtrField<std::string> *devices) {
  if (v.isTensor()) {
    const at::Tensor &t = v.toTensor();
    detail::toTensorData(t, out->mutable_tensor());
    devices->Add(t.device().is_cuda() ? "cuda" : "cpu");
  } else if (v.isNone()) {
    out->mutable_none();
  } else if (v.isBool()) {
    out->set_bool_value(v.toBool());
  } else if (v.isInt()) {
    out->set_int_value(v.toInt());
  } else if (v.isDouble()) {
    out->set_float_value(v.toDouble());
  } else if (v.isString()) {
    out->set_string_value(v.toStringRef());
  } else if (v.isDevice()) {
    out->mutable_device()->set_spec(v.toDevice().is_cuda() ? "cuda" : "cpu");
  } else if (v.isScalar()) {
    at::Scalar s = v.toScalar();
    if (s.isFloatingPoint())
      out->set_float_value(s.toDouble());
    else if (s.isBoolean())
      out->set_bool_value(s.toBool());
    else
      out->set_int_value(s.toLong());
  } else if (v.isList()) {
    auto *list = out->mutable_list();
    for (const c10::IValue &e : v.toListRef())
      encodeArg(e, list->add_values(), devices);
  } else if (v.isTuple()) {
    auto *list = out->mutable_list();
    for (const c10::IValue &e : v.toTupleRef().elements())
      encodeArg(e, list->add_values(), devices);
  } else {
    throw std::runtime_error("rref: cannot pass an argument of type " +
                             v.tagKind() + " to an actor");
  }
}

} // namespace

ActorMesh RemoteActorBridge::actorOf(const plan::CallActor &call) {
  const plan::ActorRoute &route = call.route();
  std::string key = route.procs() + "/" + route.mesh();
  std::lock_guard<std::mutex> guard(mu);
  if (auto it = actors.find(key); it != actors.end())
    return it->second;
  int64_t actorRank = -1;
  for (int k = 0; k < route.proc_ranks_size(); ++k)
    if (route.proc_ranks(k) == rank)
      actorRank = k;
  if (actorRank < 0)
    throw std::runtime_error("rref of " + call.actor() + "." + call.endpoint() +
                             ": no actor of the mesh on the process of rank " +
                             std::to_string(rank));
  auto procsRoot = mesh::MeshView::root(
      {{"ranks", static_cast<int64_t>(route.proc_addrs_size())}});
  auto actorsRoot = mesh::MeshView::root(
      {{"ranks", static_cast<int64_t>(route.proc_ranks_size())}});
  if (!procsRoot.ok() || !actorsRoot.ok())
    throw std::runtime_error("rref: a route without procs or actors");
  std::vector<std::string> addrs(route.proc_addrs().begin(),
                                 route.proc_addrs().end());
  // Their failures are the controller's to report; here they fail the call.
  auto procs = attachProcMesh(Runtime::ofProcess(), route.procs(), *procsRoot,
                              addrs, [](const SupervisionEvent &) { return true; });
  if (!procs.ok())
    throw std::runtime_error("rref: reaching the actors' processes: " +
                             procs.status().message());
  std::vector<uint32_t> procRanks;
  for (int64_t r : route.proc_ranks())
    procRanks.push_back(static_cast<uint32_t>(r));
  auto all = attachActorMesh(*procs, route.mesh(), procRanks, *actorsRoot);
  if (!all.ok())
    throw std::runtime_error("rref: " + all.status().message());
  auto mine = all->slice("ranks", actorRank);
  if (!mine.ok())
    throw std::runtime_error("rref: " + mine.status().message());
  actors.emplace(key, *mine);
  return *mine;
}

std::vector<at::Tensor>
RemoteActorBridge::call(const plan::CallActor &call,
                        const std::vector<c10::IValue> &args) {
  if (!call.has_route())
    throw std::runtime_error(
        "rref of " + call.actor() + "." + call.endpoint() +
        ": this native tensor worker hosts no actors and the call carries no "
        "route to them");
  std::string what = call.actor() + "." + call.endpoint();
  plan::ActorCallRequest request;
  request.set_endpoint(call.endpoint());
  for (const auto &a : args)
    encodeArg(a, request.add_args(), request.mutable_devices());
  std::string bytes = request.SerializeAsString();
  ActorMesh actor = actorOf(call);
  std::vector<Blob> frames{Blob{monarch::Buffer::copyOf(bytes.data(), bytes.size())}};
  auto reply = actor
                   .callOne<std::vector<Blob>>(
                       "call", std::string("__monarch_rref__"), frames,
                       int64_t{0})
                   .get(timeout);
  if (!reply.ok())
    throw std::runtime_error("rref of " + what + ": " +
                             reply.status().message());
  if (reply->empty())
    throw std::runtime_error("rref of " + what + ": an empty reply");
  plan::ActorCallReply out;
  const monarch::Buffer &b = reply->front().buffer;
  if (!out.ParseFromArray(b.data(), static_cast<int>(b.size())))
    throw std::runtime_error("rref of " + what + ": a malformed reply");
  if (!out.error().empty())
    throw std::runtime_error(out.error());
  std::vector<at::Tensor> results;
  for (int k = 0; k < out.results_size(); ++k) {
    at::Tensor t = detail::fromTensorData(out.results(k));
    if (k < out.devices_size() && out.devices(k) == "cuda")
      t = t.to(detail::mapDevice(c10::Device(c10::kCUDA)));
    results.push_back(std::move(t));
  }
  return results;
}

} // namespace monarch::tensor
