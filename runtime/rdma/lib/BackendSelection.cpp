//===- BackendSelection.cpp - Which transfer path a process uses ---------===//
#include "monarch/rdma/BackendSelection.h"

namespace monarch::rdma {

const char *backendName(BackendKind kind) {
  switch (kind) {
  case BackendKind::Ibverbs:
    return "ibverbs";
  case BackendKind::Tcp:
    return "tcp";
  case BackendKind::None:
    return "none";
  }
  return "?";
}

namespace {

std::string envOr(const EnvLookup &env, const char *name,
                  const std::string &fallback) {
  const char *v = env(name);
  return v && *v ? std::string(v) : fallback;
}

BackendChoice tcp(std::string reason, bool fellBack) {
  BackendChoice c;
  c.kind = BackendKind::Tcp;
  c.reason = std::move(reason);
  c.fellBack = fellBack;
  return c;
}

} // namespace

Expected<BackendChoice> chooseBackend(VerbsProvider *provider,
                                      const EnvLookup &env) {
  std::string wanted = envOr(env, "MONARCH_RDMA_BACKEND", "auto");
  if (wanted == "none") {
    BackendChoice c;
    c.kind = BackendKind::None;
    c.reason = "MONARCH_RDMA_BACKEND=none";
    return c;
  }
  if (wanted == "tcp")
    return tcp("MONARCH_RDMA_BACKEND=tcp", false);
  if (wanted != "auto" && wanted != "ibverbs")
    return Status(ErrorCode::Invalid,
                  "MONARCH_RDMA_BACKEND must be auto, ibverbs, tcp or none, "
                  "not '" +
                      wanted + "'");
  bool required = wanted == "ibverbs";
  std::string disable = envOr(env, "MONARCH_RDMA_DISABLE_IBVERBS", "0");
  if (disable != "0" && disable != "") {
    if (required)
      return Status(ErrorCode::Invalid, "MONARCH_RDMA_BACKEND=ibverbs but "
                                        "MONARCH_RDMA_DISABLE_IBVERBS is set");
    return tcp("ibverbs disabled by MONARCH_RDMA_DISABLE_IBVERBS", true);
  }

  auto unusable = [&](std::string why) -> Expected<BackendChoice> {
    if (required)
      return Status(ErrorCode::NotFound,
                    "MONARCH_RDMA_BACKEND=ibverbs: " + why);
    return tcp(std::move(why), true);
  };
  if (!provider)
    return unusable("this build has no libibverbs");
  auto devices = provider->devices();
  if (!devices.ok())
    return unusable("cannot list RDMA devices: " + devices.status().message());
  if (devices->empty())
    return unusable("no RDMA device found");
  std::string name = envOr(env, "MONARCH_RDMA_DEVICE", (*devices)[0].name);
  auto device = provider->open(name);
  if (!device.ok())
    return unusable("cannot open RDMA device '" + name +
                    "': " + device.status().message());
  BackendChoice c;
  c.kind = BackendKind::Ibverbs;
  c.device = std::move(*device);
  c.reason = "RDMA device " + name;
  return c;
}

} // namespace monarch::rdma
