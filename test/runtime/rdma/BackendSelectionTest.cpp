//===- BackendSelectionTest.cpp - ibverbs, tcp or none from the env -------===//
#include "monarch/rdma/BackendSelection.h"
#include "monarch/rdma/IbVerbs.h"
#include "monarch/rdma/LoopbackVerbs.h"
#include "monarch/rdma/RdmaHandle.h"

#include <gtest/gtest.h>

#include <map>

namespace monarch::rdma {
namespace {

EnvLookup envOf(std::map<std::string, std::string> vars) {
  auto shared = std::make_shared<std::map<std::string, std::string>>(vars);
  return [shared](const char *name) -> const char * {
    auto it = shared->find(name);
    return it == shared->end() ? nullptr : it->second.c_str();
  };
}

TEST(BackendSelection, AutoUsesTheFirstDevice) {
  auto fabric = std::make_shared<LoopbackFabric>(
      std::vector<std::string>{"mlx5_0", "mlx5_1"});
  auto provider = makeLoopbackProvider(fabric);
  auto c = chooseBackend(provider.get(), envOf({}));
  ASSERT_TRUE(c.ok()) << c.status().toString();
  EXPECT_EQ(c->kind, BackendKind::Ibverbs);
  ASSERT_TRUE(c->device);
  EXPECT_EQ(c->device->name(), "mlx5_0");
  EXPECT_FALSE(c->fellBack);
  auto picked =
      chooseBackend(provider.get(), envOf({{"MONARCH_RDMA_DEVICE", "mlx5_1"}}));
  ASSERT_TRUE(picked.ok());
  EXPECT_EQ(picked->device->name(), "mlx5_1");
}

TEST(BackendSelection, FallsBackToTcpNamingTheReason) {
  auto empty = makeLoopbackProvider(
      std::make_shared<LoopbackFabric>(std::vector<std::string>{}));
  auto c = chooseBackend(empty.get(), envOf({}));
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->kind, BackendKind::Tcp);
  EXPECT_TRUE(c->fellBack);
  EXPECT_EQ(c->reason, "no RDMA device found");

  auto none = chooseBackend(nullptr, envOf({}));
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->reason, "this build has no libibverbs");

  auto fabric =
      std::make_shared<LoopbackFabric>(std::vector<std::string>{"mlx5_0"});
  auto provider = makeLoopbackProvider(fabric);
  auto disabled = chooseBackend(provider.get(),
                                envOf({{"MONARCH_RDMA_DISABLE_IBVERBS", "1"}}));
  ASSERT_TRUE(disabled.ok());
  EXPECT_EQ(disabled->kind, BackendKind::Tcp);
  EXPECT_NE(disabled->reason.find("MONARCH_RDMA_DISABLE_IBVERBS"),
            std::string::npos);
  auto badDevice =
      chooseBackend(provider.get(), envOf({{"MONARCH_RDMA_DEVICE", "eth9"}}));
  ASSERT_TRUE(badDevice.ok());
  EXPECT_EQ(badDevice->kind, BackendKind::Tcp);
  EXPECT_NE(badDevice->reason.find("cannot open RDMA device 'eth9'"),
            std::string::npos);
}

TEST(BackendSelection, ExplicitChoices) {
  auto fabric =
      std::make_shared<LoopbackFabric>(std::vector<std::string>{"mlx5_0"});
  auto provider = makeLoopbackProvider(fabric);
  auto tcp =
      chooseBackend(provider.get(), envOf({{"MONARCH_RDMA_BACKEND", "tcp"}}));
  ASSERT_TRUE(tcp.ok());
  EXPECT_EQ(tcp->kind, BackendKind::Tcp);
  EXPECT_FALSE(tcp->fellBack);
  auto none =
      chooseBackend(provider.get(), envOf({{"MONARCH_RDMA_BACKEND", "none"}}));
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->kind, BackendKind::None);
  auto bad =
      chooseBackend(provider.get(), envOf({{"MONARCH_RDMA_BACKEND", "roce"}}));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("not 'roce'"), std::string::npos);
  auto empty = makeLoopbackProvider(
      std::make_shared<LoopbackFabric>(std::vector<std::string>{}));
  auto required =
      chooseBackend(empty.get(), envOf({{"MONARCH_RDMA_BACKEND", "ibverbs"}}));
  ASSERT_FALSE(required.ok());
  EXPECT_NE(required.status().message().find("no RDMA device found"),
            std::string::npos);
}

TEST(BackendSelection, RealLibibverbsListsDevicesWithoutFailing) {
  auto provider = makeIbVerbsProvider();
  if (!provider)
    GTEST_SKIP() << "built without libibverbs";
  auto devices = provider->devices();
  if (devices.ok() && !devices->empty())
    GTEST_SKIP() << "this machine has an RDMA device; the engine tests do not "
                    "use it";
  // Either no device or no kernel support at all (containers): both fall
  // back to TCP with the reason in the warning.
  auto c = chooseBackend(provider.get(), envOf({}));
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->kind, BackendKind::Tcp);
  EXPECT_TRUE(c->fellBack);
  if (devices.ok())
    EXPECT_EQ(c->reason, "no RDMA device found");
  else
    EXPECT_EQ(c->reason,
              "cannot list RDMA devices: " + devices.status().message());
}

TEST(RdmaHandleCodec, RoundTripsThroughBytesAndValues) {
  RdmaHandle h;
  h.ownerAddr = "tcp://127.0.0.1:4000";
  h.servicePort = 12;
  h.bufferId = 3;
  h.size = 1ull << 33;
  h.writable = false;
  h.device = "mlx5_0";
  h.remoteAddr = 0x7fff0000;
  h.rkey = 0xabc;
  auto back = RdmaHandle::fromBytes(h.toBytes());
  ASSERT_TRUE(back.ok()) << back.status().toString();
  EXPECT_EQ(back->ownerAddr, h.ownerAddr);
  EXPECT_EQ(back->servicePort, 12u);
  EXPECT_EQ(back->size, h.size);
  EXPECT_FALSE(back->writable);
  EXPECT_EQ(back->rkey, 0xabcu);
  EXPECT_EQ(back->remoteAddr, h.remoteAddr);
  EXPECT_FALSE(RdmaHandle::fromBytes("not a handle").ok());
  proto::Value missing = h.toValue();
  missing.mutable_map()->mutable_entries()->erase("size");
  auto bad = RdmaHandle::fromValue(missing);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'size'"), std::string::npos);
}

} // namespace
} // namespace monarch::rdma
