//===- ActorMesh.h - Messaging the actors of a mesh -------------*- C++ -*-===//
//
// An ActorMesh names one actor per rank of a proc mesh (times an optional
// per-proc shape). Adverbs:
//   call<R>(ep, args...)     every rank; Future<ValueMesh<R>>
//   callOne<R>(ep, args...)  the only rank; error if the mesh has more
//   broadcast(ep, args...)   fire and forget; a failure stops the actor and
//                            is reported to the owner (supervise)
//   choose<R>(ep, args...)   one live rank, round robin
//   stream<R>(ep, args...)   one future per rank, completed as replies arrive
// Slicing follows the proc mesh rules (monarch/mesh/MeshView.h) and gives a
// mesh that messages only those ranks.
//
//===----------------------------------------------------------------------===//
#ifndef MONARCH_RUNTIME_PROC_ACTORMESH_H
#define MONARCH_RUNTIME_PROC_ACTORMESH_H

#include "monarch/mesh/MeshView.h"
#include "monarch/runtime/actor/Future.h"
#include "monarch/runtime/actor/Value.h"
#include "monarch/runtime/actor/ValueMesh.h"
#include "monarch/runtime/proc/PendingCall.h"
#include "monarch/runtime/supervision/Supervision.h"

#include <memory>
#include <string>

namespace monarch {

class ActorMeshState;

class ActorMesh {
public:
  ActorMesh(std::shared_ptr<ActorMeshState> state, mesh::MeshView view);

  const mesh::MeshView &view() const { return meshView; }
  const std::string &name() const;
  size_t size() const { return static_cast<size_t>(meshView.size()); }

  Expected<ActorMesh> slice(const std::string &dim, int64_t index) const;
  Expected<ActorMesh> slice(const std::string &dim,
                            const mesh::Range &range) const;

  template <typename R, typename... A>
  Future<ValueMesh<R>> call(const std::string &endpoint,
                            const A &...args) const {
    PayloadList payloads;
    proto::Value encoded = encodeArgs(payloads, args...);
    auto sent = castRaw(meshView.ranks(), endpoint, std::move(encoded),
                        std::move(payloads), Mode::Merged);
    if (!sent.ok())
      return Future<ValueMesh<R>>::failed(sent.status());
    mesh::MeshView view = meshView;
    std::string meshName = name();
    return (*sent)->all().template map<ValueMesh<R>>(
        [view, meshName](const std::vector<RankOutcome> &outcomes)
            -> Expected<ValueMesh<R>> {
          std::vector<R> values;
          values.reserve(outcomes.size());
          for (const auto &o : outcomes) {
            auto v = decodeOutcome<R>(o, meshName);
            if (!v.ok())
              return v.status();
            values.push_back(std::move(*v));
          }
          return ValueMesh<R>(view, std::move(values));
        });
  }

  template <typename R, typename... A>
  Future<R> callOne(const std::string &endpoint, const A &...args) const {
    if (size() != 1)
      return Future<R>::failed(
          Status(ErrorCode::Invalid, "call_one on mesh '" + name() + "' of " +
                                         std::to_string(size()) +
                                         " ranks; it needs exactly one"));
    return single<R>(meshView.ranks(), endpoint, args...);
  }

  template <typename R, typename... A>
  Future<R> choose(const std::string &endpoint, const A &...args) const {
    auto rank = chooseRank();
    if (!rank.ok())
      return Future<R>::failed(rank.status());
    return single<R>({*rank}, endpoint, args...);
  }

  template <typename... A>
  Status broadcast(const std::string &endpoint, const A &...args) const {
    PayloadList payloads;
    proto::Value encoded = encodeArgs(payloads, args...);
    auto sent = castRaw(meshView.ranks(), endpoint, std::move(encoded),
                        std::move(payloads), Mode::None);
    return sent.ok() ? Status::ok() : sent.status();
  }

  /// broadcast() to the ranks of the view that have not failed, skipping
  /// those that have (and reaching unresponsive ones, whose connections
  /// stay open): how a controller keeps driving the live slices of a mesh
  /// after one of its procs died. Ok with nothing to send.
  template <typename... A>
  Status broadcastLive(const std::string &endpoint, const A &...args) const {
    PayloadList payloads;
    proto::Value encoded = encodeArgs(payloads, args...);
    return broadcastLiveRaw(endpoint, std::move(encoded), std::move(payloads));
  }

  template <typename R, typename... A>
  std::vector<Future<R>> stream(const std::string &endpoint,
                                const A &...args) const {
    PayloadList payloads;
    proto::Value encoded = encodeArgs(payloads, args...);
    auto ranks = meshView.ranks();
    auto sent = castRaw(ranks, endpoint, std::move(encoded),
                        std::move(payloads), Mode::Direct);
    std::vector<Future<R>> out;
    std::string meshName = name();
    for (size_t i = 0; i < ranks.size(); ++i) {
      if (!sent.ok()) {
        out.push_back(Future<R>::failed(sent.status()));
        continue;
      }
      out.push_back(
          (*sent)->rank(i).template map<R>([meshName](const RankOutcome &o) {
            return decodeOutcome<R>(o, meshName);
          }));
    }
    return out;
  }

  /// Handles supervision events of this mesh (all its slices share it).
  void supervise(SupervisionHook hook) const;

  /// Decodes one rank's outcome; errors name the mesh and rank.
  template <typename R>
  static Expected<R> decodeOutcome(const RankOutcome &o,
                                   const std::string &meshName) {
    if (!o.status.isOk())
      return Status(o.status.code(), meshName + "[" + std::to_string(o.rank) +
                                         "]: " + o.status.message());
    try {
      return decodeValue<R>(o.value, *o.payloads);
    } catch (const DecodeError &e) {
      return Status(ErrorCode::Invalid, meshName + "[" +
                                            std::to_string(o.rank) +
                                            "]: bad reply: " + e.what());
    }
  }

private:
  enum class Mode { None, Merged, Direct };

  Expected<std::shared_ptr<PendingCall>>
  castRaw(const std::vector<int64_t> &ranks, const std::string &endpoint,
          proto::Value args, PayloadList payloads, Mode mode,
          bool toUnresponsive = false) const;
  Status broadcastLiveRaw(const std::string &endpoint, proto::Value args,
                          PayloadList payloads) const;
  Expected<int64_t> chooseRank() const;

  template <typename R, typename... A>
  Future<R> single(const std::vector<int64_t> &ranks,
                   const std::string &endpoint, const A &...args) const {
    PayloadList payloads;
    proto::Value encoded = encodeArgs(payloads, args...);
    auto sent = castRaw(ranks, endpoint, std::move(encoded),
                        std::move(payloads), Mode::Merged);
    if (!sent.ok())
      return Future<R>::failed(sent.status());
    std::string meshName = name();
    return (*sent)->all().template map<R>(
        [meshName](const std::vector<RankOutcome> &o) {
          return decodeOutcome<R>(o.front(), meshName);
        });
  }

  std::shared_ptr<ActorMeshState> state;
  mesh::MeshView meshView;
};

} // namespace monarch

#endif // MONARCH_RUNTIME_PROC_ACTORMESH_H
