//===- Ref.cpp - monarch._C.Ref: a handle of one ref on the workers -------===//
//
// CachedDispatch.h. The Python face is monarch._src.tensor.core.Ref:
//
//   r = Ref(session, mesh, stream, owns=True)   # ids from the session
//   r = Ref.fresh(session, mesh, stream, mesh_id, stream_id)
//   r.id, r.mesh_id, r.stream_id, r.session, r.mesh, r.stream, r.owns
//   r.lending        # None until a borrow involves it; r.lend() makes it
//
// When the last handle goes away an owned ref is deleted on the workers: the
// finalizer (tp_finalize, so it runs before a cycle is cleared) queues a
// DeleteRefs into the session's stream, which sends it after the
// instructions already issued. The type takes part in garbage collection:
// held_refs() finds live refs through gc.get_objects().
//
//===----------------------------------------------------------------------===//

#include "CachedDispatch.h"

#include <structmember.h>

namespace py = pybind11;

namespace monarch::python {

namespace {

PyObject *lendingClass = nullptr; ///< core.Lending, set once (set_lending)
PyObject *strNextRef, *strNewRef, *strMeshIdOf, *strStreamId, *strIrName,
    *strStream;

int64_t asInt(PyObject *o) {
  if (!o)
    return -1;
  long long v = PyLong_AsLongLong(o);
  Py_DECREF(o);
  return v;
}

int refInit(RefObject *self, PyObject *args, PyObject *kwds) {
  static const char *names[] = {"session", "mesh", "stream", "owns", nullptr};
  PyObject *session, *mesh, *stream;
  int owns = 1;
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOO|p",
                                   const_cast<char **>(names), &session, &mesh,
                                   &stream, &owns))
    return -1;
  long long id = asInt(PyObject_CallMethodNoArgs(session, strNewRef));
  if (id == -1 && PyErr_Occurred())
    return -1;
  long long meshId =
      asInt(PyObject_CallMethodOneArg(session, strMeshIdOf, mesh));
  if (meshId == -1 && PyErr_Occurred())
    return -1;
  PyObject *name = PyObject_GetAttr(stream, strIrName);
  if (!name)
    return -1;
  long long streamId =
      asInt(PyObject_CallMethodOneArg(session, strStreamId, name));
  Py_DECREF(name);
  if (streamId == -1 && PyErr_Occurred())
    return -1;
  Py_INCREF(session);
  Py_INCREF(mesh);
  Py_INCREF(stream);
  Py_XSETREF(self->session, session);
  Py_XSETREF(self->mesh, mesh);
  Py_XSETREF(self->stream, stream);
  self->id = id;
  self->meshId = meshId;
  self->streamId = streamId;
  self->owns = static_cast<char>(owns);
  return 0;
}

/// The delete of an owned ref, from its finalizer: errors are swallowed (a
/// stopped session, an interpreter shutting down), as a __del__'s would be.
void refFinalize(PyObject *obj) {
  auto *self = reinterpret_cast<RefObject *>(obj);
  if (!self->owns || !self->session)
    return;
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  if (PyObject *stream = PyObject_GetAttr(self->session, strStream)) {
    if (frontend::InstructionStream *s = instructionStreamOf(stream)) {
      s->deleteRef(self->id, self->meshId, self->streamId); // the common case
    } else { // the session's own rule (Session.queue_delete)
      PyObject *r = PyObject_CallMethod(self->session, "queue_delete", "LLL",
                                        self->id, self->meshId, self->streamId);
      Py_XDECREF(r);
    }
    Py_DECREF(stream);
  }
  PyErr_Clear();
  PyErr_Restore(type, value, tb);
}

int refTraverse(RefObject *self, visitproc visit, void *arg) {
  Py_VISIT(self->session);
  Py_VISIT(self->mesh);
  Py_VISIT(self->stream);
  Py_VISIT(self->lending);
  return 0;
}

int refClear(RefObject *self) {
  Py_CLEAR(self->session);
  Py_CLEAR(self->mesh);
  Py_CLEAR(self->stream);
  Py_CLEAR(self->lending);
  return 0;
}

void refDealloc(RefObject *self) {
  if (PyObject_CallFinalizerFromDealloc(reinterpret_cast<PyObject *>(self)) < 0)
    return; // resurrected by its finalizer
  PyObject_GC_UnTrack(self);
  if (self->weakrefs)
    PyObject_ClearWeakRefs(reinterpret_cast<PyObject *>(self));
  refClear(self);
  Py_TYPE(self)->tp_free(reinterpret_cast<PyObject *>(self));
}

PyObject *refFresh(PyObject *, PyObject *const *args, Py_ssize_t n) {
  if (n != 5) {
    PyErr_SetString(PyExc_TypeError,
                    "Ref.fresh(session, mesh, stream, mesh_id, stream_id)");
    return nullptr;
  }
  long long meshId = PyLong_AsLongLong(args[3]);
  long long streamId = PyLong_AsLongLong(args[4]);
  if (PyErr_Occurred())
    return nullptr;
  return newOwnedRef(args[0], args[1], args[2], meshId, streamId);
}

PyObject *refLend(RefObject *self, PyObject *) {
  if (!self->lending || self->lending == Py_None) {
    if (!lendingClass) {
      PyErr_SetString(PyExc_RuntimeError, "Ref.lend: no Lending class set");
      return nullptr;
    }
    PyObject *l = PyObject_CallNoArgs(lendingClass);
    if (!l)
      return nullptr;
    Py_XSETREF(self->lending, l);
  }
  Py_INCREF(self->lending);
  return self->lending;
}

PyObject *refRepr(RefObject *self) {
  return PyUnicode_FromFormat("<Ref %lld mesh %lld stream %lld%s>", self->id,
                              self->meshId, self->streamId,
                              self->owns ? "" : " (not owned)");
}

PyMethodDef refMethods[] = {
    {"fresh", reinterpret_cast<PyCFunction>(reinterpret_cast<void *>(refFresh)),
     METH_FASTCALL | METH_STATIC,
     "A new owned ref whose ids the caller knows (dispatch's hot path)."},
    {"lend", reinterpret_cast<PyCFunction>(refLend), METH_NOARGS,
     "The ref's Lending, made on first use."},
    {nullptr, nullptr, 0, nullptr}};

PyMemberDef refMembers[] = {
    {"session", T_OBJECT, offsetof(RefObject, session), 0, nullptr},
    {"mesh", T_OBJECT, offsetof(RefObject, mesh), 0, nullptr},
    {"stream", T_OBJECT, offsetof(RefObject, stream), 0, nullptr},
    {"lending", T_OBJECT, offsetof(RefObject, lending), 0, nullptr},
    {"id", T_LONGLONG, offsetof(RefObject, id), 0, nullptr},
    {"mesh_id", T_LONGLONG, offsetof(RefObject, meshId), 0, nullptr},
    {"stream_id", T_LONGLONG, offsetof(RefObject, streamId), 0, nullptr},
    {"owns", T_BOOL, offsetof(RefObject, owns), 0, nullptr},
    {nullptr, 0, 0, 0, nullptr}};

} // namespace

PyTypeObject RefType = [] {
  PyTypeObject t{PyVarObject_HEAD_INIT(nullptr, 0)};
  t.tp_name = "monarch._C.Ref";
  t.tp_basicsize = sizeof(RefObject);
  t.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC;
  t.tp_doc = "A ref on the workers; deleted there when the last handle goes "
             "away (owned refs).";
  t.tp_new = PyType_GenericNew;
  t.tp_init = reinterpret_cast<initproc>(refInit);
  t.tp_dealloc = reinterpret_cast<destructor>(refDealloc);
  t.tp_finalize = refFinalize;
  t.tp_traverse = reinterpret_cast<traverseproc>(refTraverse);
  t.tp_clear = reinterpret_cast<inquiry>(refClear);
  t.tp_weaklistoffset = offsetof(RefObject, weakrefs);
  t.tp_methods = refMethods;
  t.tp_members = refMembers;
  t.tp_repr = reinterpret_cast<reprfunc>(refRepr);
  return t;
}();

PyObject *newOwnedRef(PyObject *session, PyObject *mesh, PyObject *stream,
                      long long meshId, long long streamId) {
  PyObject *next = PyObject_GetAttr(session, strNextRef);
  if (!next)
    return nullptr;
  long long id = PyLong_AsLongLong(next);
  Py_DECREF(next);
  if (id == -1 && PyErr_Occurred())
    return nullptr;
  PyObject *after = PyLong_FromLongLong(id + 1);
  if (!after)
    return nullptr;
  int set = PyObject_SetAttr(session, strNextRef, after);
  Py_DECREF(after);
  if (set < 0)
    return nullptr;
  auto *r = reinterpret_cast<RefObject *>(RefType.tp_alloc(&RefType, 0));
  if (!r)
    return nullptr;
  Py_INCREF(session);
  Py_INCREF(mesh);
  Py_INCREF(stream);
  r->session = session;
  r->mesh = mesh;
  r->stream = stream;
  r->id = id;
  r->meshId = meshId;
  r->streamId = streamId;
  r->owns = 1;
  return reinterpret_cast<PyObject *>(r);
}

void bindRef(py::module_ &m) {
  strNextRef = PyUnicode_InternFromString("_next_ref");
  strNewRef = PyUnicode_InternFromString("new_ref");
  strMeshIdOf = PyUnicode_InternFromString("mesh_id_of");
  strStreamId = PyUnicode_InternFromString("stream_id");
  strIrName = PyUnicode_InternFromString("ir_name");
  strStream = PyUnicode_InternFromString("stream");
  if (PyType_Ready(&RefType) < 0)
    throw py::error_already_set();
  Py_INCREF(&RefType);
  m.add_object("Ref", reinterpret_cast<PyObject *>(&RefType));
  m.def(
      "set_lending",
      [](py::object cls) {
        Py_XDECREF(lendingClass);
        lendingClass = cls.release().ptr();
      },
      py::arg("cls"), "The class Ref.lend() makes (core.Lending).");
}

} // namespace monarch::python
