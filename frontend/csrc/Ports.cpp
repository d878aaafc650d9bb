//===- Ports.cpp - monarch._actors: Monarch's Channel / Port ----------------===//
//
// Channel.open() (monarch/_src/actor/ports.py) opens a runtime port
// (runtime/proc/Port.h) in this process: its ref -- (address, port) -- is the
// Python Port, which pickles to any process of the job and sends from there
// (send_to_port). What arrives is queued here for PortReceiver.recv(), whose
// k-th call gets the k-th message, in the order each sender sent.
//
// The runtime's handler runs on the io loop: it only queues (no GIL). The
// queue is bounded (kMaxQueued messages not yet received): past that a
// message is dropped with one error in the log, so a receiver that never
// reads cannot grow without bound. A `once` port takes one message. The port
// closes when its receiver is dropped or closed; later messages are dropped
// by the runtime.
//
//===----------------------------------------------------------------------===//

#include "Frames.h"

#include "monarch/runtime/proc/Port.h"
#include "monarch/runtime/proc/Runtime.h"
#include "monarch/runtime/util/Log.h"

#include <pybind11/stl.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>

namespace py = pybind11;

namespace monarch::python {
namespace {

constexpr size_t kMaxQueued = 1 << 20;

/// What arrived on one port, by arrival number, until its recv() takes it.
class PortQueue {
public:
  explicit PortQueue(bool once) : once(once) {}

  void push(Frames frames) {
    {
      std::lock_guard<std::mutex> guard(mu);
      if (once && received > 0)
        return;
      if (arrived.size() >= kMaxQueued) {
        if (!warned)
          log::error("a port's receiver holds ", kMaxQueued,
                     " messages it has not received; dropping more");
        warned = true;
        return;
      }
      arrived.emplace(received++, std::move(frames));
    }
    cv.notify_all();
  }
  uint64_t ticket() {
    std::lock_guard<std::mutex> guard(mu);
    if (once && tickets > 0)
      throw std::runtime_error(
          "recv() on a once port that was already received from "
          "(Channel.open(once=True) takes one message)");
    return tickets++;
  }
  /// The message of arrival number `ticket`, waiting at most `timeout`.
  std::optional<Frames> take(uint64_t ticket,
                             std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu);
    if (!cv.wait_for(lock, timeout, [&] { return arrived.count(ticket); }))
      return std::nullopt;
    auto it = arrived.find(ticket);
    Frames out = std::move(it->second);
    arrived.erase(it);
    return out;
  }
  bool has(uint64_t ticket) {
    std::lock_guard<std::mutex> guard(mu);
    return arrived.count(ticket) > 0;
  }

private:
  std::mutex mu;
  std::condition_variable cv;
  std::map<uint64_t, Frames> arrived;
  uint64_t received = 0; ///< messages arrived so far
  uint64_t tickets = 0;  ///< recv() calls so far
  bool once;
  bool warned = false;
};

/// One recv(): ("ok", frames) once its message arrived, None before.
class ReceiveFuture {
public:
  ReceiveFuture(std::shared_ptr<PortQueue> queue, uint64_t ticket)
      : queue(std::move(queue)), ticket(ticket) {}
  py::object get(int64_t timeoutMs) {
    if (taken)
      return py::make_tuple("ok", toPy(*taken));
    std::optional<Frames> frames;
    {
      py::gil_scoped_release release;
      frames = queue->take(ticket, std::chrono::milliseconds(
                                       std::max<int64_t>(timeoutMs, 0)));
    }
    if (!frames)
      return py::none();
    taken = std::move(frames);
    return py::make_tuple("ok", toPy(*taken));
  }
  bool ready() const { return taken.has_value() || queue->has(ticket); }

private:
  std::shared_ptr<PortQueue> queue;
  uint64_t ticket;
  std::optional<Frames> taken;
};

/// The receiving end: the runtime port and its queue.
class PortReceiver {
public:
  explicit PortReceiver(bool once)
      : queue(std::make_shared<PortQueue>(once)) {
    std::weak_ptr<PortQueue> weak = queue;
    py::gil_scoped_release release; // may start this process's runtime
    port = std::make_unique<monarch::Port>(
        Runtime::ofProcess(),
        [weak](proto::Value &&value, PayloadList &&payloads) {
          auto q = weak.lock();
          if (!q)
            return;
          try {
            q->push(decodeValue<Frames>(value, payloads));
          } catch (const std::exception &e) {
            log::warning("a port message that is not frames was dropped: ",
                         e.what());
          }
        });
  }
  std::pair<std::string, uint64_t> ref() const {
    if (!port)
      throw std::runtime_error("the port is closed");
    auto r = port->ref();
    return {r.addr(), r.port()};
  }
  ReceiveFuture recv() {
    if (!port)
      throw std::runtime_error("recv() on a closed port");
    return ReceiveFuture(queue, queue->ticket());
  }
  void close() {
    py::gil_scoped_release release;
    port.reset();
  }

private:
  std::shared_ptr<PortQueue> queue;
  std::unique_ptr<monarch::Port> port;
};

void sendToPort(const std::string &addr, uint64_t port,
                const py::sequence &frames) {
  Frames values = fromPy(frames);
  proto::PortRef ref;
  ref.set_addr(addr);
  ref.set_port(port);
  proto::Value value;
  PayloadList payloads;
  encodeValue(values, value, payloads);
  Status status;
  {
    py::gil_scoped_release release;
    status = monarch::sendToPort(ref, std::move(value), std::move(payloads));
  }
  if (!status.isOk())
    throw std::runtime_error("sending to the port at " + addr + ": " +
                             status.message());
}

} // namespace

void bindPorts(py::module_ &m) {
  py::class_<ReceiveFuture>(m, "ReceiveFuture")
      .def("get", &ReceiveFuture::get, py::arg("timeout_ms"))
      .def("ready", &ReceiveFuture::ready);
  py::class_<PortReceiver>(m, "PortReceiver")
      .def(py::init<bool>(), py::arg("once") = false)
      .def("ref", &PortReceiver::ref)
      .def("recv", &PortReceiver::recv)
      .def("close", &PortReceiver::close);
  m.def("send_to_port", &sendToPort, py::arg("addr"), py::arg("port"),
        py::arg("frames"));
}

} // namespace monarch::python
