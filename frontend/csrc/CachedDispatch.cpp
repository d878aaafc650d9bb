//===- CachedDispatch.cpp - A captured op whose signature is cached -------===//
//
// CachedDispatch.h. The Python this replaces on a hit is dispatch.py's
// dispatch() after its first call of a signature; the order of the checks
// and the state read are the same, and every case it does not handle is a
// MISS that the Python path then decides.
//
//===----------------------------------------------------------------------===//

#include "CachedDispatch.h"

#include <functional>
#include <memory>
#include <unordered_map>
#include <string>
#include <utility>
#include <vector>

namespace py = pybind11;

namespace monarch::python {

namespace {

/// An owned reference (RAII for the C API's new references).
class Obj {
public:
  Obj() = default;
  explicit Obj(PyObject *p) : p(p) {}
  Obj(const Obj &) = delete;
  Obj &operator=(const Obj &) = delete;
  Obj(Obj &&o) noexcept : p(o.p) { o.p = nullptr; }
  Obj &operator=(Obj &&o) noexcept {
    std::swap(p, o.p);
    return *this;
  }
  ~Obj() { Py_XDECREF(p); }
  static Obj borrowed(PyObject *p) {
    Py_XINCREF(p);
    return Obj(p);
  }
  PyObject *get() const { return p; }
  PyObject *release() {
    PyObject *r = p;
    p = nullptr;
    return r;
  }
  explicit operator bool() const { return p != nullptr; }

private:
  PyObject *p = nullptr;
};

/// What configure_cached_dispatch() hands over: the Python state a hit reads.
struct State {
  PyObject *miss = nullptr;          ///< the MISS sentinel
  PyObject *cache = nullptr;         ///< dispatch._cache
  PyObject *tensorCore = nullptr;    ///< core.TensorCore
  PyObject *coreDict = nullptr;      ///< core's globals (_tensor_class)
  PyObject *makeWrapper = nullptr;   ///< torch.Tensor._make_wrapper_subclass
  PyObject *defaultDtype = nullptr;  ///< torch.get_default_dtype
  PyObject *devicesDict = nullptr;   ///< devices' globals (device_override)
  PyObject *tracingDict = nullptr;   ///< tracing's globals (_current)
  PyObject *streamsDict = nullptr;   ///< streams' globals (_active)
  PyObject *locationDict = nullptr;  ///< location's globals (_inside, ...)
  PyObject *simpleTypes = nullptr;   ///< dispatch._SIMPLE
  PyObject *sizeType = nullptr;      ///< torch.Size
  PyObject *tensorType = nullptr;    ///< torch.Tensor
  PyObject *tensorKey = nullptr;     ///< dispatch._tensor_key (other tensors)
  PyObject *modesDict = nullptr;     ///< modes' globals (_mesh_stack)
  PyObject *fallback = nullptr;      ///< dispatch._dispatch_in_handler
  bool configured = false;
};
State state;

/// Interned attribute names.
struct Names {
  PyObject *info, *fast, *spec, *mesh, *ref, *session, *recording, *dead,
      *stream, *templates, *meshIdKey, *streamIds, *irName, *locationId,
      *unreachable, *outputs, *specs, *structure, *shape, *stride, *offset,
      *dtype, *fakeDevice, *device, *tensorClass, *deviceOverride, *current,
      *active, *withTorch, *isInside, *out, *attrDevice, *attrFake, *strides,
      *storageOffset, *fastLocations, *meshStack;
  void init() {
    auto s = [](const char *n) { return PyUnicode_InternFromString(n); };
    info = s("_monarch_info");
    fast = s("fast");
    spec = s("_spec");
    mesh = s("_mesh");
    ref = s("_ref");
    session = s("_session");
    recording = s("recording");
    dead = s("dead");
    stream = s("stream");
    templates = s("templates");
    meshIdKey = s("_tensor_mesh_id");
    streamIds = s("stream_ids");
    irName = s("ir_name");
    locationId = s("location_id");
    unreachable = s("unreachable");
    outputs = s("outputs");
    specs = s("specs");
    structure = s("structure");
    shape = s("shape");
    stride = s("stride");
    offset = s("offset");
    dtype = s("dtype");
    fakeDevice = s("fake_device");
    device = s("device");
    tensorClass = s("_tensor_class");
    deviceOverride = s("device_override");
    current = s("_current");
    active = s("_active");
    withTorch = s("_with_torch");
    isInside = s("_is_inside");
    out = s("out");
    attrDevice = s("_device");
    attrFake = s("_fake_tensor");
    strides = s("strides");
    storageOffset = s("storage_offset");
    fastLocations = s("_fast_locations");
    meshStack = s("_mesh_stack");
  }
};
Names names;

/// A global of a configured module (borrowed; null when unset).
PyObject *global(PyObject *dict, PyObject *name) {
  return PyDict_GetItemWithError(dict, name);
}

/// An attribute in an object's instance dict (borrowed; null when absent),
/// without running its class's attribute machinery (an OpOverload's costs).
PyObject *instanceAttr(PyObject *obj, PyObject *name) {
  Obj dict(PyObject_GenericGetDict(obj, nullptr));
  if (!dict) {
    PyErr_Clear();
    return nullptr;
  }
  return PyDict_GetItemWithError(dict.get(), name); // kept alive by obj
}

/// A distributed tensor's attribute (`_spec`, `_ref`, `_mesh`: always in its
/// instance dict, and the tensor classes define none of them), read from the
/// dict without torch.Tensor's attribute lookup; new reference.
PyObject *tensorAttr(PyObject *t, PyObject *name) {
  PyObject *v = instanceAttr(t, name);
  if (v) {
    Py_INCREF(v);
    return v;
  }
  return PyErr_Occurred() ? nullptr : PyObject_GetAttr(t, name);
}

// -- the signature (one rule: dispatch.signature calls this) -----------------

/// Why a signature could not be made: an argument it cannot describe (the
/// op takes the slow path) or a Python error.
enum class Sig { Ok, Uncacheable, Error };

Sig argKey(PyObject *a, std::vector<PyObject *> &dts, Obj &out);

Sig seqKey(PyObject *a, std::vector<PyObject *> &dts, Obj &out) {
  Obj items(PySequence_Fast(a, "a sequence"));
  if (!items)
    return Sig::Error;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(items.get());
  Obj keys(PyTuple_New(n));
  if (!keys)
    return Sig::Error;
  for (Py_ssize_t i = 0; i < n; ++i) {
    Obj k;
    Sig s = argKey(PySequence_Fast_GET_ITEM(items.get(), i), dts, k);
    if (s != Sig::Ok)
      return s;
    PyTuple_SET_ITEM(keys.get(), i, k.release());
  }
  out = Obj(PyTuple_Pack(2, reinterpret_cast<PyObject *>(Py_TYPE(a)),
                         keys.get()));
  return out ? Sig::Ok : Sig::Error;
}

Sig argKey(PyObject *a, std::vector<PyObject *> &dts, Obj &out) {
  int isCore = PyObject_TypeCheck(a, reinterpret_cast<PyTypeObject *>(
                                         state.tensorCore));
  if (isCore) {
    dts.push_back(a);
    out = Obj(tensorAttr(a, names.spec));
    return out ? Sig::Ok : Sig::Error;
  }
  // Numbers are keyed with their type (1 == 1.0 == True).
  if (PyBool_Check(a) || PyLong_CheckExact(a) || PyFloat_CheckExact(a) ||
      PyComplex_CheckExact(a)) {
    out = Obj(PyTuple_Pack(2, reinterpret_cast<PyObject *>(Py_TYPE(a)), a));
    return out ? Sig::Ok : Sig::Error;
  }
  int simple = PyObject_IsInstance(a, state.simpleTypes);
  if (simple < 0)
    return Sig::Error;
  if (simple) {
    out = Obj::borrowed(a);
    return Sig::Ok;
  }
  if (PyList_CheckExact(a) || PyTuple_CheckExact(a) ||
      Py_TYPE(a) == reinterpret_cast<PyTypeObject *>(state.sizeType))
    return seqKey(a, dts, out);
  int isTensor = PyObject_IsInstance(a, state.tensorType);
  if (isTensor < 0)
    return Sig::Error;
  if (isTensor) { // a local tensor: dispatch._tensor_key says (or None)
    Obj k(PyObject_CallOneArg(state.tensorKey, a));
    if (!k)
      return Sig::Error;
    if (k.get() == Py_None)
      return Sig::Uncacheable;
    out = std::move(k);
    return Sig::Ok;
  }
  return Sig::Uncacheable;
}

/// dispatch.signature: the key of (args, kwargs) and their distributed
/// tensors (borrowed from args/kwargs), in the order the instruction names
/// them.
Sig signatureOf(PyObject *args, PyObject *kwargs, std::vector<PyObject *> &dts,
                Obj &key) {
  Py_ssize_t n = PyTuple_GET_SIZE(args);
  Obj keys(PyTuple_New(n));
  if (!keys)
    return Sig::Error;
  for (Py_ssize_t i = 0; i < n; ++i) {
    Obj k;
    Sig s = argKey(PyTuple_GET_ITEM(args, i), dts, k);
    if (s != Sig::Ok)
      return s;
    PyTuple_SET_ITEM(keys.get(), i, k.release());
  }
  if (!kwargs || kwargs == Py_None || PyDict_GET_SIZE(kwargs) == 0) {
    key = std::move(keys);
    return Sig::Ok;
  }
  Obj items(PyTuple_New(PyDict_GET_SIZE(kwargs)));
  if (!items)
    return Sig::Error;
  Py_ssize_t pos = 0, i = 0;
  PyObject *k, *v;
  while (PyDict_Next(kwargs, &pos, &k, &v)) {
    Obj vk;
    Sig s = argKey(v, dts, vk);
    if (s != Sig::Ok)
      return s;
    PyObject *pair = PyTuple_Pack(2, k, vk.get());
    if (!pair)
      return Sig::Error;
    PyTuple_SET_ITEM(items.get(), i++, pair);
  }
  key = Obj(PyTuple_Pack(2, keys.get(), items.get()));
  return key ? Sig::Ok : Sig::Error;
}

// -- an entry, compiled for hits ----------------------------------------------

/// dispatch.Entry as a hit uses it. Kinds as dispatch.py's _NEW, _ALIAS.
struct Compiled {
  struct Output {
    int kind;  ///< 0 new (index into specs), 1 an input (index into dts)
    int index;
  };
  struct Result {
    Obj spec, shape, kwargs, device; ///< the Spec, and make_tensor's arguments
  };
  std::vector<Output> outputs;
  std::vector<Result> specs;
  int single = -1;  ///< the output returned alone, or -1: a sequence
  Obj sequence;     ///< the sequence's type (tuple, list, a return type)
  std::vector<int> order; ///< the sequence's outputs
};

/// Whether `stride` is exactly the one torch gives a new tensor of `shape`
/// (what strides=None makes); -1 with an error.
int contiguous(PyObject *shape, PyObject *stride) {
  Obj sh(PySequence_Tuple(shape)), st(PySequence_Tuple(stride));
  if (!sh || !st)
    return -1;
  Py_ssize_t n = PyTuple_GET_SIZE(sh.get());
  if (PyTuple_GET_SIZE(st.get()) != n)
    return 0;
  long long expected = 1;
  for (Py_ssize_t i = n - 1; i >= 0; --i) {
    long long size = PyLong_AsLongLong(PyTuple_GET_ITEM(sh.get(), i));
    long long s = PyLong_AsLongLong(PyTuple_GET_ITEM(st.get(), i));
    if (PyErr_Occurred())
      return -1;
    if (s != expected)
      return 0;
    expected *= size > 1 ? size : 1;
  }
  return 1;
}

void freeCompiled(PyObject *capsule) {
  delete static_cast<Compiled *>(
      PyCapsule_GetPointer(capsule, "monarch.CachedEntry"));
}

/// The entry's compiled form (entry.fast), made on its first hit; null
/// without an error when the entry's results are not a hit's to make.
Compiled *compiled(PyObject *entry) {
  Obj fast(PyObject_GetAttr(entry, names.fast));
  if (!fast)
    return nullptr;
  if (PyCapsule_CheckExact(fast.get()))
    return static_cast<Compiled *>(
        PyCapsule_GetPointer(fast.get(), "monarch.CachedEntry"));
  if (fast.get() == Py_False)
    return nullptr;

  auto c = std::make_unique<Compiled>();
  bool ok = true;
  Obj outputs(PyObject_GetAttr(entry, names.outputs));
  Obj specs(PyObject_GetAttr(entry, names.specs));
  Obj structure(PyObject_GetAttr(entry, names.structure));
  if (!outputs || !specs || !structure)
    return nullptr;
  for (Py_ssize_t i = 0; ok && i < PyList_GET_SIZE(outputs.get()); ++i) {
    PyObject *o = PyList_GET_ITEM(outputs.get(), i);
    long kind = PyLong_AsLong(PyTuple_GET_ITEM(o, 0));
    long index = PyLong_AsLong(PyTuple_GET_ITEM(o, 1));
    ok = kind == 0 || kind == 1; // an undefined result: the Python path
    c->outputs.push_back({static_cast<int>(kind), static_cast<int>(index)});
  }
  for (Py_ssize_t i = 0; ok && i < PyList_GET_SIZE(specs.get()); ++i) {
    PyObject *spec = PyList_GET_ITEM(specs.get(), i);
    Compiled::Result r;
    r.spec = Obj::borrowed(spec);
    // As a torch.Size: torch's argument parser takes one faster than a tuple.
    Obj shape(PyObject_GetAttr(spec, names.shape));
    if (shape)
      r.shape = Obj(PyObject_CallOneArg(state.sizeType, shape.get()));
    r.device = Obj(PyObject_GetAttr(spec, names.device));
    Obj stride(PyObject_GetAttr(spec, names.stride));
    Obj offset(PyObject_GetAttr(spec, names.offset));
    Obj dtype(PyObject_GetAttr(spec, names.dtype));
    Obj fakeDevice(PyObject_GetAttr(spec, names.fakeDevice));
    if (!r.shape || !r.device || !stride || !offset || !dtype || !fakeDevice)
      return nullptr;
    // make_tensor's keywords (core.py), once per entry.
    // Keywords at their defaults are left out (each costs torch's argument
    // parser): contiguous strides, a zero storage offset, requires_grad=False.
    // An offset goes with its strides: torch 2.x refuses one without them.
    r.kwargs = Obj(PyDict_New());
    long long off = PyLong_AsLongLong(offset.get());
    int dense = contiguous(r.shape.get(), stride.get());
    if (!r.kwargs || dense < 0 || (off == -1 && PyErr_Occurred()) ||
        ((!dense || off != 0) &&
         PyDict_SetItem(r.kwargs.get(), names.strides, stride.get()) < 0) ||
        (off != 0 && PyDict_SetItem(r.kwargs.get(), names.storageOffset,
                                    offset.get()) < 0) ||
        PyDict_SetItem(r.kwargs.get(), names.dtype, dtype.get()) < 0 ||
        PyDict_SetItem(r.kwargs.get(), names.device, fakeDevice.get()) < 0)
      return nullptr;
    c->specs.push_back(std::move(r));
  }
  // ("out", k), or (sequence type, [("out", k), ...]); anything else (a
  // value, an undefined result, nesting) is the Python path's _assemble.
  PyObject *kind = PyTuple_GET_ITEM(structure.get(), 0);
  PyObject *rest = PyTuple_GET_ITEM(structure.get(), 1);
  if (PyUnicode_Check(kind)) {
    ok = ok && PyUnicode_Compare(kind, names.out) == 0;
    c->single = ok ? static_cast<int>(PyLong_AsLong(rest)) : -1;
  } else if (ok && PyType_Check(kind) && PyList_Check(rest)) {
    c->sequence = Obj::borrowed(kind);
    for (Py_ssize_t i = 0; ok && i < PyList_GET_SIZE(rest); ++i) {
      PyObject *item = PyList_GET_ITEM(rest, i);
      ok = PyTuple_Check(item) && PyTuple_GET_SIZE(item) == 2 &&
           PyUnicode_Check(PyTuple_GET_ITEM(item, 0)) &&
           PyUnicode_Compare(PyTuple_GET_ITEM(item, 0), names.out) == 0;
      if (ok)
        c->order.push_back(
            static_cast<int>(PyLong_AsLong(PyTuple_GET_ITEM(item, 1))));
    }
  } else {
    ok = false;
  }
  if (PyErr_Occurred())
    return nullptr;
  if (!ok) {
    PyObject_SetAttr(entry, names.fast, Py_False);
    return nullptr;
  }
  Compiled *raw = c.get();
  Obj capsule(PyCapsule_New(c.release(), "monarch.CachedEntry", freeCompiled));
  if (!capsule || PyObject_SetAttr(entry, names.fast, capsule.get()) < 0)
    return nullptr;
  return raw; // kept alive by entry.fast
}

// -- the location --------------------------------------------------------------

/// A table keyed by (code object, int) by identity -- hashing a code object
/// walks its constants, names and bytecode, which costs more than the rest
/// of a hit. It holds a reference to each code object it keys (so an
/// address is never reused while it is a key); past 65,536 keys it starts
/// afresh.
template <typename V> class CodeMap {
public:
  CodeMap() = default;
  CodeMap(const CodeMap &) = delete;
  CodeMap &operator=(const CodeMap &) = delete;
  ~CodeMap() { clear(); }

  const V *find(PyObject *code, int n) const {
    auto it = values.find({code, n});
    return it == values.end() ? nullptr : &it->second;
  }
  void put(PyObject *code, int n, V value) {
    if (values.size() >= kLimit)
      clear();
    if (values.emplace(std::make_pair(code, n), value).second)
      Py_INCREF(code);
  }

private:
  static constexpr size_t kLimit = 1 << 16;
  struct Hash {
    size_t operator()(const std::pair<PyObject *, int> &k) const {
      return std::hash<void *>()(k.first) ^ (static_cast<size_t>(k.second) << 1);
    }
  };
  void clear() {
    for (auto &[k, v] : values)
      Py_DECREF(k.first);
    values.clear();
  }
  std::unordered_map<std::pair<PyObject *, int>, V, Hash> values;
};

/// The frame's line: PyFrame_GetLineNumber decodes the code's line table on
/// every call, so lines are remembered by (code, instruction offset). The
/// process's tables are never destroyed (no Py_DECREF after finalization).
int lineOf(PyFrameObject *f, PyObject *code) {
  static auto &lines = *new CodeMap<int>();
  int lasti = PyFrame_GetLasti(f);
  if (const int *line = lines.find(code, lasti))
    return *line;
  int line = PyFrame_GetLineNumber(f);
  lines.put(code, lasti, line);
  return line;
}

/// location.user_frame(): (code, line) of the innermost frame outside
/// monarch, torch and the standard library, with location.py's cache of
/// which code objects are inside. False when location.py has not yet
/// refreshed its prefixes (the Python path does that).
bool userFrame(Obj &code, int &line) {
  PyObject *withTorch = global(state.locationDict, names.withTorch);
  if (withTorch != Py_True)
    return false;
  PyObject *isInside = global(state.locationDict, names.isInside);
  if (!isInside)
    return false;
  // location.py's answer per code object, remembered by identity (its
  // prefixes are final once torch is in them).
  static auto &insideByCode = *new CodeMap<bool>();
  Obj frame(reinterpret_cast<PyObject *>(
      PyThreadState_GetFrame(PyThreadState_Get())));
  while (frame) {
    auto *f = reinterpret_cast<PyFrameObject *>(frame.get());
    Obj c(reinterpret_cast<PyObject *>(PyFrame_GetCode(f)));
    bool hit;
    if (const bool *known = insideByCode.find(c.get(), 0)) {
      hit = *known;
    } else {
      Obj called(PyObject_CallOneArg(isInside, c.get()));
      if (!called)
        return false;
      hit = called.get() == Py_True;
      insideByCode.put(c.get(), 0, hit);
    }
    if (!hit) {
      line = lineOf(f, c.get());
      code = std::move(c);
      return true;
    }
    frame = Obj(reinterpret_cast<PyObject *>(PyFrame_GetBack(f)));
  }
  code = Obj::borrowed(Py_None);
  line = 0;
  return true;
}

/// A session's location ids by (code object, line), as session.location_id
/// made them: kept on the session (session._fast_locations) so that they die
/// with it.
using SessionLocations = CodeMap<long long>;

void freeLocations(PyObject *capsule) {
  delete static_cast<SessionLocations *>(
      PyCapsule_GetPointer(capsule, "monarch.SessionLocations"));
}

/// session.location_id(code, line), remembered on the session.
long long locationId(PyObject *session, PyObject *code, int line) {
  Obj capsule(PyObject_GetAttr(session, names.fastLocations));
  if (!capsule) {
    if (!PyErr_ExceptionMatches(PyExc_AttributeError))
      return -1;
    PyErr_Clear();
    auto *made = new SessionLocations();
    capsule = Obj(PyCapsule_New(made, "monarch.SessionLocations", freeLocations));
    if (!capsule) {
      delete made;
      return -1;
    }
    if (PyObject_SetAttr(session, names.fastLocations, capsule.get()) < 0)
      return -1;
  }
  auto *table = static_cast<SessionLocations *>(
      PyCapsule_GetPointer(capsule.get(), "monarch.SessionLocations"));
  if (!table)
    return -1;
  if (const long long *id = table->find(code, line))
    return *id;
  Obj lineObj(PyLong_FromLong(line));
  Obj made(PyObject_CallMethodObjArgs(session, names.locationId, code,
                                      lineObj.get(), nullptr));
  if (!made)
    return -1;
  long long id = PyLong_AsLongLong(made.get());
  if (id == -1 && PyErr_Occurred())
    return -1;
  table->put(code, line, id);
  return id;
}

// -- the hit -------------------------------------------------------------------

PyObject *miss() {
  Py_INCREF(state.miss);
  return state.miss;
}

/// A failed send: the session's error for it (session.unreachable), raised,
/// as dispatch() does for the stream's RuntimeError.
PyObject *raiseUnreachable(PyObject *session) {
  if (!PyErr_ExceptionMatches(PyExc_RuntimeError))
    return nullptr;
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  PyErr_NormalizeException(&type, &value, &tb);
  Obj t(type), v(value), b(tb);
  Obj error(PyObject_CallMethodOneArg(session, names.unreachable, v.get()));
  if (!error)
    return nullptr;
  PyErr_SetObject(reinterpret_cast<PyObject *>(Py_TYPE(error.get())),
                  error.get());
  return nullptr;
}

PyObject *cachedDispatch(PyObject *, PyObject *const *argv, Py_ssize_t argc) {
  if (argc != 4) {
    PyErr_SetString(PyExc_TypeError,
                    "cached_dispatch(func, args, kwargs, mesh)");
    return nullptr;
  }
  if (!state.configured)
    return miss();
  PyObject *func = argv[0], *args = argv[1], *kwargs = argv[2];
  PyObject *mesh = argv[3];
  if (!PyTuple_Check(args) || (kwargs != Py_None && !PyDict_Check(kwargs)))
    return miss();

  PyObject *info = instanceAttr(func, names.info); // borrowed
  if (!info)
    return PyErr_Occurred() ? nullptr : miss();
  Obj fast(PyObject_GetAttr(info, names.fast));
  if (!fast)
    return nullptr;
  if (fast.get() != Py_True) // see OpInfo.fast
    return miss();

  std::vector<PyObject *> dts; // borrowed from args/kwargs
  Obj sig;
  switch (signatureOf(args, kwargs, dts, sig)) {
  case Sig::Error:
    return nullptr;
  case Sig::Uncacheable:
    return miss();
  case Sig::Ok:
    break;
  }
  Obj meshHolder;
  if (mesh == Py_None) {
    if (dts.empty())
      return miss();
    meshHolder = Obj(tensorAttr(dts[0], names.mesh));
    if (!meshHolder)
      return nullptr;
    mesh = meshHolder.get();
  }
  Obj session(PyObject_GetAttr(mesh, names.session));
  if (!session)
    return nullptr;
  Obj recording(PyObject_GetAttr(session.get(), names.recording));
  if (!recording)
    return nullptr;
  PyObject *tracing = global(state.tracingDict, names.current);
  if (tracing && tracing != Py_None && recording.get() == Py_None)
    return miss(); // tracing.check_recorded's error is the Python path's

  PyObject *override = global(state.devicesDict, names.deviceOverride);
  if (override && override != Py_None)
    return miss();
  Obj dtype(PyObject_CallNoArgs(state.defaultDtype));
  if (!dtype)
    return nullptr;
  Obj key(PyTuple_Pack(4, info, sig.get(), dtype.get(), Py_None));
  if (!key)
    return nullptr;
  PyObject *entry = PyDict_GetItemWithError(state.cache, key.get());
  if (!entry)
    return PyErr_Occurred() ? nullptr : miss(); // a first call
  Obj entryHolder = Obj::borrowed(entry);

  // check_use's common case: no borrow, the same mesh object, the stream.
  PyObject *stream = global(state.streamsDict, names.active);
  if (!stream)
    return miss();
  std::vector<int64_t> inputs;
  inputs.reserve(dts.size());
  for (PyObject *t : dts) {
    Obj ref(tensorAttr(t, names.ref));
    if (!ref)
      return nullptr;
    if (Py_TYPE(ref.get()) != &RefType)
      return miss();
    auto *r = reinterpret_cast<RefObject *>(ref.get());
    if ((r->lending && r->lending != Py_None) || r->stream != stream)
      return miss();
    Obj tmesh(tensorAttr(t, names.mesh));
    if (!tmesh)
      return nullptr;
    if (tmesh.get() != mesh)
      return miss();
    inputs.push_back(r->id);
  }
  Obj dead(PyObject_GetAttr(session.get(), names.dead));
  if (!dead)
    return nullptr;
  if (dead.get() != Py_None)
    return miss();

  Compiled *c = compiled(entry);
  if (!c)
    return PyErr_Occurred() ? nullptr : miss();

  PyObject *meshId = instanceAttr(mesh, names.meshIdKey);
  if (!meshId)
    return PyErr_Occurred() ? nullptr : miss();
  Obj streamIds(PyObject_GetAttr(session.get(), names.streamIds));
  Obj irName(PyObject_GetAttr(stream, names.irName));
  if (!streamIds || !irName)
    return nullptr;
  PyObject *streamIdObj = PyDict_GetItemWithError(streamIds.get(), irName.get());
  if (!streamIdObj)
    return PyErr_Occurred() ? nullptr : miss();
  long long mid = PyLong_AsLongLong(meshId);
  long long sid = PyLong_AsLongLong(streamIdObj);

  Obj outStream(PyObject_GetAttr(session.get(), names.stream));
  if (!outStream)
    return nullptr;
  if (!instructionStreamOf(outStream.get()))
    return miss(); // no workers: the Python path
  Obj templates(PyObject_GetAttr(session.get(), names.templates));
  if (!templates)
    return nullptr;
  PyObject *templateObj = PyDict_GetItemWithError(templates.get(), entry);
  if (!templateObj)
    return PyErr_Occurred() ? nullptr : miss();
  long long templateId = PyLong_AsLongLong(templateObj);

  Obj code;
  int line = 0;
  if (!userFrame(code, line))
    return PyErr_Occurred() ? nullptr : miss();
  long long loc = locationId(session.get(), code.get(), line);
  if (loc == -1 && PyErr_Occurred())
    return nullptr;

  // The results, from the specs; inputs that are outputs stay.
  PyObject *cls = global(state.coreDict, names.tensorClass);
  if (!cls || !PyType_Check(cls))
    return miss();
  static PyObject *checkedClass = nullptr; // held: the last class checked
  if (cls != checkedClass) {
    for (PyObject *n : {names.spec, names.ref, names.mesh,
                        names.attrDevice, names.attrFake})
      if (_PyType_Lookup(reinterpret_cast<PyTypeObject *>(cls), n))
        return miss(); // a class attribute of that name: make_tensor's way
    Py_INCREF(cls);
    Py_XSETREF(checkedClass, cls);
  }
  std::vector<Obj> objs;
  std::vector<int64_t> results;
  objs.reserve(c->outputs.size());
  results.reserve(c->outputs.size());
  for (const auto &o : c->outputs) {
    if (o.kind == 1) {
      PyObject *t = dts[o.index];
      objs.push_back(Obj::borrowed(t));
      results.push_back(inputs[o.index]);
      continue;
    }
    const Compiled::Result &spec = c->specs[o.index];
    Obj ref(newOwnedRef(session.get(), mesh, stream, mid, sid));
    if (!ref)
      return nullptr;
    Obj wrapperArgs(PyTuple_Pack(2, cls, spec.shape.get()));
    if (!wrapperArgs)
      return nullptr;
    Obj t(PyObject_Call(state.makeWrapper, wrapperArgs.get(),
                        spec.kwargs.get()));
    if (!t)
      return nullptr;
    // make_tensor's attributes, into the new instance's dict (checked once
    // per class: no class of it defines them).
    Obj dict(PyObject_GenericGetDict(t.get(), nullptr));
    if (!dict || PyDict_SetItem(dict.get(), names.spec, spec.spec.get()) < 0 ||
        PyDict_SetItem(dict.get(), names.ref, ref.get()) < 0 ||
        PyDict_SetItem(dict.get(), names.mesh, mesh) < 0 ||
        PyDict_SetItem(dict.get(), names.attrDevice, spec.device.get()) < 0 ||
        PyDict_SetItem(dict.get(), names.attrFake, Py_None) < 0)
      return nullptr;
    results.push_back(reinterpret_cast<RefObject *>(ref.get())->id);
    objs.push_back(std::move(t));
  }
  if (issueOp(outStream.get(), templateId, mid, sid, loc, inputs, results) < 0)
    return raiseUnreachable(session.get());

  if (c->single >= 0)
    return objs[c->single].release();
  Obj list(PyList_New(static_cast<Py_ssize_t>(c->order.size())));
  if (!list)
    return nullptr;
  for (size_t i = 0; i < c->order.size(); ++i) {
    Obj &o = objs[c->order[i]];
    Py_INCREF(o.get());
    PyList_SET_ITEM(list.get(), static_cast<Py_ssize_t>(i), o.get());
  }
  if (reinterpret_cast<PyTypeObject *>(c->sequence.get()) == &PyList_Type)
    return list.release();
  return PyObject_CallOneArg(c->sequence.get(), list.get());
}

/// CaptureMode.__torch_dispatch__(func, types, args=(), kwargs=None): a hit
/// here, else dispatch()'s path (in the capture handler's bookkeeping), on
/// the innermost active mesh.
PyObject *captureDispatch(PyObject *, PyObject *const *argv, Py_ssize_t argc) {
  if (argc < 2 || argc > 4) {
    PyErr_SetString(PyExc_TypeError,
                    "__torch_dispatch__(func, types, args=(), kwargs=None)");
    return nullptr;
  }
  if (!state.configured) {
    PyErr_SetString(PyExc_RuntimeError, "configure_cached_dispatch first");
    return nullptr;
  }
  Obj empty;
  PyObject *args = argc > 2 ? argv[2] : nullptr;
  if (!args) {
    empty = Obj(PyTuple_New(0));
    args = empty.get();
  }
  PyObject *kwargs = argc > 3 ? argv[3] : Py_None;
  PyObject *stack = global(state.modesDict, names.meshStack);
  PyObject *mesh = Py_None;
  if (stack && PyList_Check(stack) && PyList_GET_SIZE(stack) > 0)
    mesh = PyList_GET_ITEM(stack, PyList_GET_SIZE(stack) - 1);
  Obj meshHolder = Obj::borrowed(mesh); // the stack may change meanwhile
  PyObject *call[4] = {argv[0], args, kwargs, mesh};
  PyObject *r = cachedDispatch(nullptr, call, 4);
  if (r != state.miss)
    return r;
  Py_DECREF(r);
  return PyObject_Vectorcall(state.fallback, call, 4, nullptr);
}

PyMethodDef captureDispatchDef = {
    "capture_dispatch",
    reinterpret_cast<PyCFunction>(reinterpret_cast<void *>(captureDispatch)),
    METH_FASTCALL,
    "CaptureMode.__torch_dispatch__: cached_dispatch on the active mesh, "
    "else the Python path."};

PyMethodDef cachedDispatchDef = {
    "cached_dispatch",
    reinterpret_cast<PyCFunction>(reinterpret_cast<void *>(cachedDispatch)),
    METH_FASTCALL,
    "cached_dispatch(func, args, kwargs, mesh): a captured op's results, "
    "issued, when its signature is cached and nothing but the common case "
    "applies; else MISS (CachedDispatch.h)."};

} // namespace

void bindCachedDispatch(py::module_ &m) {
  names.init();
  state.miss = PyObject_CallNoArgs(reinterpret_cast<PyObject *>(&PyBaseObject_Type));
  if (!state.miss)
    throw py::error_already_set();
  Py_INCREF(state.miss);
  m.add_object("MISS", state.miss);
  PyObject *fn = PyCFunction_New(&cachedDispatchDef, nullptr);
  if (!fn)
    throw py::error_already_set();
  m.add_object("cached_dispatch", fn);
  PyObject *capture = PyCFunction_New(&captureDispatchDef, nullptr);
  if (!capture)
    throw py::error_already_set();
  m.add_object("capture_dispatch", capture);
  m.def(
      "configure_cached_dispatch",
      [](py::dict handles) {
        auto take = [&](const char *name) {
          py::object o = handles[name];
          return o.release().ptr(); // kept for the process's life
        };
        state.cache = take("cache");
        state.tensorCore = take("tensor_core");
        state.coreDict = take("core_globals");
        state.makeWrapper = take("make_wrapper");
        state.defaultDtype = take("default_dtype");
        state.devicesDict = take("devices_globals");
        state.tracingDict = take("tracing_globals");
        state.streamsDict = take("streams_globals");
        state.locationDict = take("location_globals");
        state.simpleTypes = take("simple_types");
        state.sizeType = take("size_type");
        state.tensorType = take("tensor_type");
        state.tensorKey = take("tensor_key");
        state.modesDict = take("modes_globals");
        state.fallback = take("fallback");
        state.configured = true;
      },
      py::arg("handles"),
      "The Python state cached_dispatch reads (dispatch.py, once).");
  m.def(
      "signature",
      [](py::tuple args, py::object kwargs) -> py::object {
        if (!state.configured)
          throw std::runtime_error("signature: configure_cached_dispatch first");
        std::vector<PyObject *> dts;
        Obj key;
        switch (signatureOf(args.ptr(), kwargs.ptr(), dts, key)) {
        case Sig::Error:
          throw py::error_already_set();
        case Sig::Uncacheable:
          return py::none();
        case Sig::Ok:
          break;
        }
        py::list out;
        for (PyObject *t : dts)
          out.append(py::handle(t));
        return py::make_tuple(py::reinterpret_steal<py::object>(key.release()),
                              out);
      },
      py::arg("args"), py::arg("kwargs"),
      "dispatch.signature: (key, distributed tensors) of a call, or None "
      "when an argument cannot be keyed.");
}

} // namespace monarch::python
