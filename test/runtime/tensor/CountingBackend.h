//===- CountingBackend.h - A backend that counts what reaches it -*- C++ -*-===//
//
// Tests of decorating backends (the CUDA backend's IPC transfers, the
// host-local all-gathers) check that the calls they serve themselves never
// reach the backend they decorate: this one forwards to `inner` and counts
// the point-to-point and all-gather calls of all its communicators.
//
//===----------------------------------------------------------------------===//
#ifndef MONARCH_TEST_TENSOR_COUNTINGBACKEND_H
#define MONARCH_TEST_TENSOR_COUNTINGBACKEND_H

#include "monarch/tensor/Collectives.h"

#include <atomic>

namespace monarch::tensor::testing {

struct CallCounts {
  std::atomic<int> sendRecvs{0}, allgathers{0};
};

class CountingCommunicator : public ForwardingCommunicator {
public:
  CountingCommunicator(std::shared_ptr<Communicator> inner, CallCounts &counts)
      : ForwardingCommunicator(std::move(inner)), counts(counts) {}
  Status sendRecv(const std::vector<PeerBuffer> &s,
                  const std::vector<PeerBuffer> &r, uint64_t tag) override {
    ++counts.sendRecvs;
    return inner->sendRecv(s, r, tag);
  }
  Status allgather(Buffer in, Buffer out) override {
    ++counts.allgathers;
    return inner->allgather(in, out);
  }

private:
  CallCounts &counts;
};

class CountingBackend : public CollectiveBackend {
public:
  explicit CountingBackend(std::shared_ptr<CollectiveBackend> inner)
      : inner(std::move(inner)) {}
  const char *name() const override { return "counting"; }
  Expected<std::shared_ptr<Communicator>>
  connect(const std::string &key, const std::vector<int64_t> &ranks,
          int64_t self) override {
    auto c = inner->connect(key, ranks, self);
    if (!c.ok())
      return c.status();
    return std::shared_ptr<Communicator>(
        std::make_shared<CountingCommunicator>(c.value(), counts));
  }
  CallCounts counts;

private:
  std::shared_ptr<CollectiveBackend> inner;
};

} // namespace monarch::tensor::testing

#endif // MONARCH_TEST_TENSOR_COUNTINGBACKEND_H
