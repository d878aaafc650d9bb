//===- PlanBuilder.h - Building plans in C++ --------------------*- C++ -*-===//
//
// A small fluent helper over the generated protobuf classes, used by tests,
// benchmarks and tools. It assigns instruction and ref ids; the result is an
// ordinary plan::Program that still goes through validatePlan when loaded.
//
//===----------------------------------------------------------------------===//
#ifndef MONARCH_TENSOR_PLANBUILDER_H
#define MONARCH_TENSOR_PLANBUILDER_H

#include "monarch/mesh/MeshView.h"
#include "monarch/tensor/Plan.h"

#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

namespace monarch::tensor {

/// Constructors for plan::Value.
namespace val {
plan::Value ref(int64_t id);
plan::Value refs(const std::vector<int64_t> &ids);
plan::Value i(int64_t v);
plan::Value f(double v);
plan::Value b(bool v);
plan::Value s(const std::string &v);
plan::Value ints(const std::vector<int64_t> &v);
plan::Value floats(const std::vector<double> &v);
plan::Value dtype(plan::DType v);
plan::Value device(const std::string &spec);
plan::Value none();
plan::Value scalar(double v);
plan::Value scalarInt(int64_t v);
plan::Value list(const std::vector<plan::Value> &v);
plan::Value optional(const plan::Value &v);
plan::Value tensor(plan::DType dtype, const std::vector<int64_t> &shape,
                   const void *data, size_t bytes);
} // namespace val

plan::TensorMeta meta(plan::DType dtype, const std::vector<int64_t> &shape);

class PlanBuilder {
public:
  /// A plan over a dense root mesh, e.g. {{"host", 2}, {"gpu", 2}}.
  explicit PlanBuilder(std::vector<std::pair<std::string, int64_t>> rootShape);

  /// Mesh id 0: the root.
  int64_t root() const { return 0; }
  const mesh::MeshView &rootView() const { return rootMesh; }
  /// Declares a view of the root; returns its id.
  int64_t mesh(const mesh::MeshView &view);
  /// Declares a stream; returns its id (0 is the default stream).
  int64_t stream(const std::string &name);
  /// A fresh ref id.
  int64_t ref() { return nextRef++; }

  /// Appends an instruction with a fresh id; fill its kind through the
  /// returned reference (valid until the next append).
  plan::Instruction &add(int64_t mesh, int64_t stream = 0,
                         const std::string &location = "");

  /// Appends an ATen call; returns the first result ref (or -1 when
  /// nresults is 0).
  int64_t
  op(int64_t mesh, const std::string &name, const std::string &overload,
     const std::vector<plan::Value> &args, int nresults = 1, int64_t stream = 0,
     const std::vector<std::pair<std::string, plan::Value>> &kwargs = {});
  int64_t rank(int64_t mesh, const std::vector<std::string> &dims,
               int64_t stream = 0);
  int64_t reduce(int64_t mesh, int64_t input, const plan::TensorMeta &inputMeta,
                 const std::vector<std::string> &dims, plan::ReduceOp op,
                 bool scatter = false, int64_t stream = 0);
  int64_t send(int64_t sourceMesh, int64_t destMesh, int64_t input,
               const plan::TensorMeta &meta, int64_t stream = 0);
  /// Returns the instruction id (the key of the fetch reply).
  int64_t fetch(int64_t mesh, int64_t ref, int64_t stream = 0);
  int64_t status(int64_t mesh);
  void deleteRefs(int64_t mesh, const std::vector<int64_t> &refs,
                  int64_t stream = 0);

  plan::Program &program() { return prog; }
  const plan::Program &program() const { return prog; }
  std::string serialize() const;

private:
  plan::Program prog;
  mesh::MeshView rootMesh;
  int64_t nextMesh = 1;
  int64_t nextStream = 1;
  int64_t nextRef = 1;
  int64_t nextInstruction = 1;
};

} // namespace monarch::tensor

#endif // MONARCH_TENSOR_PLANBUILDER_H
