//===- ValueMesh.h - One value per rank of a mesh ---------------*- C++ -*-===//
#ifndef MONARCH_RUNTIME_ACTOR_VALUEMESH_H
#define MONARCH_RUNTIME_ACTOR_VALUEMESH_H

#include "monarch/mesh/MeshView.h"

#include <cstdint>
#include <vector>

namespace monarch {

/// The results of `call`: values laid out like the mesh they came from,
/// indexed by coordinates (or by position in row-major order).
template <typename T> class ValueMesh {
public:
  ValueMesh(mesh::MeshView view, std::vector<T> values)
      : meshView(std::move(view)), items(std::move(values)) {}

  const mesh::MeshView &view() const { return meshView; }
  size_t size() const { return items.size(); }
  const T &operator[](size_t i) const { return items[i]; }
  /// The value at coordinates of the view (row-major over its dims).
  const T &at(const std::vector<int64_t> &coords) const {
    size_t index = 0;
    const auto &dims = meshView.dims();
    for (size_t d = 0; d < dims.size() && d < coords.size(); ++d)
      index = index * dims[d].size + coords[d];
    return items.at(index);
  }
  const std::vector<T> &values() const { return items; }
  auto begin() const { return items.begin(); }
  auto end() const { return items.end(); }

private:
  mesh::MeshView meshView;
  std::vector<T> items;
};

} // namespace monarch

#endif // MONARCH_RUNTIME_ACTOR_VALUEMESH_H
