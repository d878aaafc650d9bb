//===- PlanBuilder.cpp - Building plans in C++ ----------------------------===//

#include "monarch/tensor/PlanBuilder.h"

namespace monarch::tensor {

namespace val {
plan::Value ref(int64_t id) {
  plan::Value v;
  v.set_ref(id);
  return v;
}
plan::Value refs(const std::vector<int64_t> &ids) {
  plan::Value v;
  for (int64_t id : ids)
    v.mutable_ref_list()->add_refs(id);
  return v;
}
plan::Value i(int64_t x) {
  plan::Value v;
  v.set_int_value(x);
  return v;
}
plan::Value f(double x) {
  plan::Value v;
  v.set_float_value(x);
  return v;
}
plan::Value b(bool x) {
  plan::Value v;
  v.set_bool_value(x);
  return v;
}
plan::Value s(const std::string &x) {
  plan::Value v;
  v.set_string_value(x);
  return v;
}
plan::Value ints(const std::vector<int64_t> &xs) {
  plan::Value v;
  auto *l = v.mutable_int_list();
  for (int64_t x : xs)
    l->add_values(x);
  return v;
}
plan::Value floats(const std::vector<double> &xs) {
  plan::Value v;
  auto *l = v.mutable_float_list();
  for (double x : xs)
    l->add_values(x);
  return v;
}
plan::Value dtype(plan::DType x) {
  plan::Value v;
  v.set_dtype(x);
  return v;
}
plan::Value device(const std::string &spec) {
  plan::Value v;
  v.mutable_device()->set_spec(spec);
  return v;
}
plan::Value none() {
  plan::Value v;
  v.mutable_none();
  return v;
}
plan::Value scalar(double x) {
  plan::Value v;
  v.mutable_scalar()->set_float_value(x);
  return v;
}
plan::Value scalarInt(int64_t x) {
  plan::Value v;
  v.mutable_scalar()->set_int_value(x);
  return v;
}
plan::Value list(const std::vector<plan::Value> &xs) {
  plan::Value v;
  for (const auto &x : xs)
    *v.mutable_list()->add_values() = x;
  return v;
}
plan::Value optional(const plan::Value &x) {
  plan::Value v;
  *v.mutable_optional()->mutable_value() = x;
  return v;
}
plan::Value tensor(plan::DType dt, const std::vector<int64_t> &shape,
                   const void *data, size_t bytes) {
  plan::Value v;
  auto *t = v.mutable_tensor();
  t->set_dtype(dt);
  for (int64_t d : shape)
    t->add_shape(d);
  t->set_data(data, bytes);
  return v;
}
} // namespace val

plan::TensorMeta meta(plan::DType dtype, const std::vector<int64_t> &shape) {
  plan::TensorMeta m;
  m.set_dtype(dtype);
  for (int64_t d : shape)
    m.add_shape(d);
  return m;
}

PlanBuilder::PlanBuilder(std::vector<std::pair<std::string, int64_t>> shape)
    : rootMesh(mesh::MeshView::root(shape).value()) {
  prog.set_magic(kPlanMagic);
  prog.set_version(kPlanVersion);
  for (const auto &d : rootMesh.dims()) {
    auto *dim = prog.add_root();
    dim->set_name(d.name);
    dim->set_size(d.size);
    dim->set_stride(d.stride);
  }
}

int64_t PlanBuilder::mesh(const mesh::MeshView &view) {
  auto *m = prog.add_meshes();
  m->set_id(nextMesh);
  m->set_offset(view.offset());
  for (const auto &d : view.dims()) {
    auto *dim = m->add_dims();
    dim->set_name(d.name);
    dim->set_size(d.size);
    dim->set_stride(d.stride);
  }
  return nextMesh++;
}

int64_t PlanBuilder::stream(const std::string &name) {
  auto *s = prog.add_streams();
  s->set_id(nextStream);
  s->set_name(name);
  return nextStream++;
}

plan::Instruction &PlanBuilder::add(int64_t mesh, int64_t stream,
                                    const std::string &location) {
  auto *inst = prog.add_instructions();
  inst->set_id(nextInstruction++);
  inst->set_mesh(mesh);
  inst->set_stream(stream);
  inst->set_location(location);
  return *inst;
}

int64_t PlanBuilder::op(
    int64_t mesh, const std::string &name, const std::string &overload,
    const std::vector<plan::Value> &args, int nresults, int64_t stream,
    const std::vector<std::pair<std::string, plan::Value>> &kwargs) {
  auto *call = add(mesh, stream).mutable_call_op();
  call->set_name(name);
  call->set_overload(overload);
  for (const auto &a : args)
    *call->add_args() = a;
  for (const auto &[k, v] : kwargs) {
    auto *kw = call->add_kwargs();
    kw->set_name(k);
    *kw->mutable_value() = v;
  }
  int64_t first = -1;
  for (int i = 0; i < nresults; ++i) {
    int64_t r = ref();
    if (i == 0)
      first = r;
    call->add_results(r);
  }
  return first;
}

int64_t PlanBuilder::rank(int64_t mesh, const std::vector<std::string> &dims,
                          int64_t stream) {
  auto *rt = add(mesh, stream).mutable_rank_tensor();
  for (const auto &d : dims)
    rt->add_dims(d);
  int64_t r = ref();
  rt->set_result(r);
  return r;
}

int64_t PlanBuilder::reduce(int64_t mesh, int64_t input,
                            const plan::TensorMeta &inputMeta,
                            const std::vector<std::string> &dims,
                            plan::ReduceOp op, bool scatter, int64_t stream) {
  auto *r = add(mesh, stream).mutable_reduce();
  r->set_input(input);
  *r->mutable_input_meta() = inputMeta;
  for (const auto &d : dims)
    r->add_dims(d);
  r->set_op(op);
  r->set_scatter(scatter);
  int64_t result = ref();
  r->set_result(result);
  return result;
}

int64_t PlanBuilder::send(int64_t sourceMesh, int64_t destMesh, int64_t input,
                          const plan::TensorMeta &m, int64_t stream) {
  auto *s = add(sourceMesh, stream).mutable_send_tensor();
  s->set_input(input);
  s->set_source_mesh(sourceMesh);
  s->set_dest_mesh(destMesh);
  *s->mutable_meta() = m;
  int64_t result = ref();
  s->set_result(result);
  return result;
}

int64_t PlanBuilder::fetch(int64_t mesh, int64_t r, int64_t stream) {
  auto &inst = add(mesh, stream);
  inst.mutable_fetch()->set_ref(r);
  return inst.id();
}

int64_t PlanBuilder::status(int64_t mesh) {
  auto &inst = add(mesh);
  inst.mutable_request_status();
  return inst.id();
}

void PlanBuilder::deleteRefs(int64_t mesh, const std::vector<int64_t> &refs,
                             int64_t stream) {
  auto *d = add(mesh, stream).mutable_delete_refs();
  for (int64_t r : refs)
    d->add_refs(r);
}

std::string PlanBuilder::serialize() const { return prog.SerializeAsString(); }

} // namespace monarch::tensor
