//===- CachedDispatch.h - The eager path's per-op work, in C ------*- C++ -*-===//
//
// docs/python.md "How capture is fast": every ATen call captured by the
// Python frontend goes through monarch._src.tensor.dispatch. Its first call
// per signature (the op and its arguments' metadata) runs on meta tensors and
// leaves a cache entry; every later call only checks the usage rules, makes
// the results and issues one templated instruction. Written in Python, that
// second half cost ~8 us an op -- twice local eager torch on a CPU. Here it
// is C, as one call from the capture mode:
//
//   r = _C.cached_dispatch(func, args, kwargs, mesh)   # Python: dispatch.py
//   if r is _C.MISS: r = dispatch(func, args, kwargs, mesh)   # the full path
//
// A hit is the same as dispatch()'s cached path, with the same state read
// (its module globals and the session's tables, handed over once by
// configure_cached_dispatch); everything that is not the common case -- a
// borrow, another stream, a first call, tracing without a recording, a dead
// session, an undefined result -- is a MISS, and the Python path decides
// (and raises its errors). The cache key is computed only here
// (_C.signature), so there is one rule for it.
//
// monarch._C.Ref is the handle of one ref on the workers, a C type so that
// making and dropping one (every op's result) costs no Python frame: its
// finalizer queues the DeleteRefs into the session's C++ stream directly.
//
//===----------------------------------------------------------------------===//
#ifndef MONARCH_FRONTEND_CSRC_CACHEDDISPATCH_H
#define MONARCH_FRONTEND_CSRC_CACHEDDISPATCH_H

#include "InstructionStream.h"

#include <pybind11/pybind11.h>

#include <cstdint>
#include <vector>

namespace monarch::python {

/// The C++ stream of a monarch._C.InstructionStream object, or null for any
/// other object (None: a session without workers). Defined in _C.cpp.
frontend::InstructionStream *instructionStreamOf(PyObject *obj);

/// InstructionStream.op of `stream` (a monarch._C.InstructionStream): the
/// append, and the send of a full batch with the GIL released. Defined in
/// _C.cpp; sets a Python error and returns -1 on failure.
int64_t issueOp(PyObject *stream, int64_t templateId, int64_t mesh,
                int64_t streamId, int64_t locationId,
                const std::vector<int64_t> &inputs,
                const std::vector<int64_t> &results);

/// The Ref type (Ref.cpp).
struct RefObject {
  PyObject_HEAD PyObject *session;
  PyObject *mesh;
  PyObject *stream;
  PyObject *lending;
  long long id;
  long long meshId;
  long long streamId;
  char owns;
  PyObject *weakrefs;
};
extern PyTypeObject RefType;

/// A new owned Ref whose ids the caller knows; its id is the session's next
/// (`session._next_ref`, advanced). Null with a Python error on failure.
PyObject *newOwnedRef(PyObject *session, PyObject *mesh, PyObject *stream,
                      long long meshId, long long streamId);

void bindRef(pybind11::module_ &m);
void bindCachedDispatch(pybind11::module_ &m);

} // namespace monarch::python

#endif // MONARCH_FRONTEND_CSRC_CACHEDDISPATCH_H
