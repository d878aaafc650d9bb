//===- Rdma.cpp - monarch._rdma: RDMA buffers for Python ------------------===//
//
// The binding under monarch.rdma (docs/rdma.md). Python passes memory as a
// buffer-protocol object or as (address, size) of a torch tensor and keeps
// that object referenced in C++ for as long as a registration or a transfer
// uses it. Those references may be released on the runtime's io thread,
// which must never take the GIL, so releases are queued and the queue is
// drained on the next call from Python (which holds the GIL).
//
//===----------------------------------------------------------------------===//
#include "monarch/rdma/RdmaBuffer.h"
#include "monarch/rdma/StagedMemory.h"
#include "monarch/runtime/proc/Runtime.h"

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <mutex>
#include <vector>

namespace py = pybind11;
using namespace monarch;
using namespace monarch::rdma;

namespace {

std::mutex releaseMu;
std::vector<PyObject *> releaseQueue;

void drainReleases() {
  std::vector<PyObject *> batch;
  {
    std::lock_guard<std::mutex> guard(releaseMu);
    batch.swap(releaseQueue);
  }
  for (PyObject *o : batch)
    Py_DECREF(o);
}

/// Holds a Python object from any thread; the last holder queues its
/// release.
std::shared_ptr<void> hold(const py::object &obj) {
  PyObject *raw = obj.ptr();
  Py_INCREF(raw);
  return std::shared_ptr<void>(raw, [](void *p) {
    std::lock_guard<std::mutex> guard(releaseMu);
    releaseQueue.push_back(static_cast<PyObject *>(p));
  });
}

[[noreturn]] void raise(const Status &s) {
  py::object err = py::module_::import("monarch._src.rdma.buffer").attr("RDMAError");
  PyErr_SetObject(err.ptr(),
                  py::make_tuple(s.message(), errorCodeName(s.code())).ptr());
  throw py::error_already_set();
}

RdmaHandle handleOf(const py::bytes &bytes) {
  auto h = RdmaHandle::fromBytes(std::string(bytes));
  if (!h.ok())
    raise(h.status());
  return *h;
}

/// A transfer in flight: get(ms) -> None on timeout, else (ok, message, code).
struct Transfer {
  Future<Unit> future;
  py::object get(int64_t ms) {
    drainReleases();
    Expected<Unit> out = Status(ErrorCode::Timeout, "");
    {
      py::gil_scoped_release release;
      out = future.get(std::chrono::milliseconds(ms));
    }
    drainReleases();
    if (!out.ok() && out.status().code() == ErrorCode::Timeout &&
        !future.ready())
      return py::none();
    if (out.ok())
      return py::make_tuple(true, "", "Ok");
    return py::make_tuple(false, out.status().message(),
                          errorCodeName(out.status().code()));
  }
  bool ready() const { return future.ready(); }
};

struct Owned {
  std::unique_ptr<RdmaBuffer> buffer;
};

RdmaOp makeOp(const std::string &kind, const py::bytes &handle, uint64_t offset,
              uintptr_t addr, size_t length, const py::object &keep) {
  RdmaOp op;
  if (kind == "read")
    op.kind = RdmaOp::Kind::Read;
  else if (kind == "write")
    op.kind = RdmaOp::Kind::Write;
  else
    raise(
        Status(ErrorCode::Invalid,
               "RDMA operation must be 'read' or 'write', not '" + kind + "'"));
  op.remote = handleOf(handle);
  op.remoteOffset = offset;
  op.local = reinterpret_cast<void *>(addr);
  op.length = length;
  op.keepLocal = hold(keep);
  return op;
}

std::shared_ptr<RdmaEngine> engine() {
  auto e = RdmaEngine::forProcess();
  if (!e.ok())
    raise(e.status());
  return *e;
}

} // namespace

PYBIND11_MODULE(_rdma, m) {
  m.doc() = "RDMA buffers and one-sided transfers (docs/rdma.md)";

  py::class_<Transfer>(m, "Transfer")
      .def("get", &Transfer::get, py::arg("timeout_ms"))
      .def("ready", &Transfer::ready);

  py::class_<Owned>(m, "OwnedBuffer")
      .def("handle",
           [](const Owned &o) {
             return py::bytes(o.buffer->handle().toBytes());
           })
      .def("drop", [](Owned &o) {
        drainReleases();
        Status s = o.buffer->drop();
        drainReleases();
        if (!s.isOk())
          raise(s);
      });

  // `device`: nonzero when `addr` is the host copy of that CUDA memory
  // (StagedMemory.h), which transfers then read and write through.
  m.def(
      "register",
      [](uintptr_t addr, size_t size, bool writable, py::object keep,
         uintptr_t device) {
        drainReleases();
        auto e = engine();
        std::shared_ptr<StagedMemory> staged;
        if (device) {
          auto s = cudaStagedMemory(device, reinterpret_cast<uint8_t *>(addr),
                                    size);
          if (!s.ok())
            raise(s.status());
          staged = *s;
        }
        auto buf = RdmaBuffer::create(e, reinterpret_cast<void *>(addr), size,
                                      writable, hold(keep), std::move(staged));
        if (!buf.ok())
          raise(buf.status());
        return Owned{std::make_unique<RdmaBuffer>(std::move(*buf))};
      },
      py::arg("addr"), py::arg("size"), py::arg("writable"), py::arg("keep"),
      py::arg("device") = 0);

  m.def("buffer_address", [](py::buffer obj) {
    py::buffer_info info = obj.request();
    if (info.ndim > 1 || (info.ndim == 1 && info.strides[0] != info.itemsize))
      raise(Status(ErrorCode::Invalid,
                   "RDMA needs one contiguous 1-D range of memory"));
    return py::make_tuple(reinterpret_cast<uintptr_t>(info.ptr),
                          info.size * info.itemsize, info.readonly);
  });

  m.def("submit", [](const std::vector<py::tuple> &ops) {
    drainReleases();
    std::vector<RdmaOp> batch;
    for (const auto &t : ops) {
      if (t.size() != 6)
        raise(Status(ErrorCode::Invalid, "an RDMA op is a 6-tuple"));
      batch.push_back(makeOp(t[0].cast<std::string>(), t[1].cast<py::bytes>(),
                             t[2].cast<uint64_t>(), t[3].cast<uintptr_t>(),
                             t[4].cast<size_t>(), t[5]));
    }
    auto e = engine();
    return Transfer{e->submit(std::move(batch))};
  });

  m.def("drop_remote", [](const py::bytes &handle) {
    drainReleases();
    return Transfer{engine()->dropRemote(handleOf(handle))};
  });

  m.def("is_local", [](const py::bytes &handle) -> bool {
    auto e = RdmaEngine::forProcess();
    return e.ok() && handleOf(handle).ownerAddr == (*e)->runtime().addr();
  });

  m.def("handle_info", [](const py::bytes &handle) {
    RdmaHandle h = handleOf(handle);
    py::dict d;
    d["owner"] = h.ownerAddr;
    d["id"] = h.bufferId;
    d["size"] = h.size;
    d["writable"] = h.writable;
    d["device"] = h.device;
    return d;
  });

  m.def("backend",
        [] { return std::string(backendName(RdmaEngine::processBackend())); });
}
