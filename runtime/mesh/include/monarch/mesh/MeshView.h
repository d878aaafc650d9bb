//===- MeshView.h - Named, strided views of a root proc mesh ----*- C++ -*-===//
//
// Every proc mesh in monarch -- the root one spawned by spawn_procs and every
// rename/split/slice/flatten of it -- is an affine view of the root's ranks:
// named dims with sizes and strides plus an offset. The rank at coordinates c
// is `offset + sum(c[i] * strides[i])` and ranks of a dense root are the
// row-major linearization of its coordinates (DESIGN.md §6.1).
//
// This library is dependency-free and shared by the dialect (static checks and
// folding), the runtime (communicator groups, casting) and, through bindings,
// the Python frontend, so all three agree on every rule and message.
//
//===----------------------------------------------------------------------===//
#ifndef MONARCH_MESH_MESHVIEW_H
#define MONARCH_MESH_MESHVIEW_H

#include "monarch/mesh/Result.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace monarch::mesh {

/// The most ranks a mesh may hold, and the bound on every rank a view names
/// (2^20, about a million procs: beyond any cluster, yet small enough that a
/// per-rank table is cheap everywhere). Checked arithmetically wherever a
/// mesh enters -- the dialect's verifier, the plan loader, spawn -- so no
/// input makes anything enumerate or allocate per rank past it. How many
/// procs one host may start is a separate, smaller limit (docs/runtime.md).
inline constexpr int64_t kMaxMeshRanks = int64_t{1} << 20;

/// A named dimension of a view.
struct Dim {
  std::string name;
  int64_t size;
  int64_t stride;

  bool operator==(const Dim &other) const {
    return name == other.name && size == other.size && stride == other.stride;
  }
};

/// Arguments of `split`, in the order the user wrote them. A key naming an
/// existing dim maps it to new names (outermost first); any other key gives the
/// size of a new dim.
struct SplitSpec {
  std::vector<std::pair<std::string, std::vector<std::string>>> dims;
  std::vector<std::pair<std::string, int64_t>> sizes;
};

/// A half-open range with a positive step, like Python's `slice(start, stop,
/// step)` after normalization against the dim's size. Negative start/stop count
/// from the end as in Python; nullopt means "from the beginning"/"to the end".
struct Range {
  std::optional<int64_t> start;
  std::optional<int64_t> stop;
  int64_t step = 1;
};

class MeshView {
public:
  /// The dense row-major root mesh, e.g. {{"host", 2}, {"gpu", 4}}.
  static Result<MeshView>
  root(const std::vector<std::pair<std::string, int64_t>> &shape);

  /// A view from explicit parts, validated (unique non-empty names, sizes >= 1,
  /// strides >= 0, offset >= 0, at most kMaxMeshRanks ranks, every rank below
  /// kMaxMeshRanks), with overflow-checked arithmetic and no enumeration.
  static Result<MeshView> create(int64_t offset, std::vector<Dim> dims);

  int64_t offset() const { return offsetValue; }
  const std::vector<Dim> &dims() const { return dimList; }
  size_t ndim() const { return dimList.size(); }
  std::vector<std::string> names() const;
  std::vector<int64_t> sizes() const;
  std::vector<int64_t> strides() const;

  /// Index of a dim, or nullopt.
  std::optional<size_t> find(std::string_view name) const;

  /// Number of ranks in the view (1 for a 0-d view).
  int64_t size() const;
  /// Size of one dim / product of sizes of several; KeyError if unknown.
  Result<int64_t> size(std::string_view name) const;
  Result<int64_t> size(const std::vector<std::string> &names) const;

  /// Global rank (in the root) at these coordinates; IndexError out of range.
  Result<int64_t> rankAt(const std::vector<int64_t> &coords) const;
  /// Coordinates of a global rank, or nullopt when the view does not hold it.
  std::optional<std::vector<int64_t>> coordsOf(int64_t rank) const;
  bool contains(int64_t rank) const { return coordsOf(rank).has_value(); }
  /// All global ranks in row-major order of the view's coordinates.
  std::vector<int64_t> ranks() const;

  /// `slice(dim=index)`: drops the dim.
  Result<MeshView> slice(std::string_view name, int64_t index) const;
  /// `slice(dim=range)`: keeps the dim, restricted.
  Result<MeshView> slice(std::string_view name, const Range &range) const;
  /// `split(...)`, per DESIGN.md §6.1.
  Result<MeshView> split(const SplitSpec &spec) const;
  /// `rename(a="b", ...)` == `split(a=("b",), ...)`.
  Result<MeshView>
  rename(const std::vector<std::pair<std::string, std::string>> &renames) const;
  /// `flatten(name)`: one dim holding every rank; only for dense views.
  Result<MeshView> flatten(std::string_view name) const;

  /// The largest rank the view holds (offset + sum((size - 1) * stride)).
  int64_t maxRank() const;

  /// True when the ranks are `offset + 0 .. size()-1` in row-major order.
  bool isDense() const;

  /// Ranks that share all coordinates outside `dims` with `rank` (the
  /// communicator of `rank` for a collective over `dims`), in row-major order
  /// of `dims`. Empty `dims` means every dim. KeyError for an unknown dim,
  /// ValueError for a repeated one, IndexError if the view lacks `rank`.
  Result<std::vector<int64_t>>
  groupOf(int64_t rank, const std::vector<std::string> &dims) const;
  /// Ranks in each communicator over `dims` (the product of their sizes;
  /// all dims when empty), with groupOf's errors; nothing is enumerated.
  Result<int64_t> groupSize(const std::vector<std::string> &dims) const;
  /// Every communicator over `dims`, ordered by the remaining coordinates.
  Result<std::vector<std::vector<int64_t>>>
  groups(const std::vector<std::string> &dims) const;

  /// "{host=2, gpu=4}" (sizes only) and the full form used in diagnostics,
  /// "offset=0 host=2:4 gpu=4:1".
  std::string shapeString() const;
  std::string layoutString() const;
  /// Ranks laid out by dims: a grid for 1-D/2-D views; views with more dims
  /// print one grid per index of the outer dims, each under a header.
  std::string toTable() const;

  bool operator==(const MeshView &other) const {
    return offsetValue == other.offsetValue && dimList == other.dimList;
  }
  bool operator!=(const MeshView &other) const { return !(*this == other); }

private:
  MeshView(int64_t offset, std::vector<Dim> dims)
      : offsetValue(offset), dimList(std::move(dims)) {}

  Result<size_t> lookup(std::string_view name) const;

  int64_t offsetValue = 0;
  std::vector<Dim> dimList;
};

} // namespace monarch::mesh

#endif // MONARCH_MESH_MESHVIEW_H
