//===- MeshView.cpp - Named, strided views of a root proc mesh ------------===//

#include "monarch/mesh/MeshView.h"

#include <algorithm>
#include <numeric>
#include <set>
#include <sstream>

namespace monarch::mesh {

namespace {

MeshError indexError(std::string message) {
  return {ErrorKind::Index, std::move(message)};
}
MeshError keyError(std::string message) {
  return {ErrorKind::Key, std::move(message)};
}
MeshError valueError(std::string message) {
  return {ErrorKind::Value, std::move(message)};
}

std::string joinNames(const std::vector<Dim> &dims) {
  std::string out;
  for (const Dim &dim : dims) {
    if (!out.empty())
      out += ", ";
    out += dim.name;
  }
  return out.empty() ? "none" : out;
}

/// Advances `coords` to the next row-major coordinate within `sizes`; false
/// after the last one.
bool nextCoords(std::vector<int64_t> &coords,
                const std::vector<int64_t> &sizes) {
  for (size_t i = coords.size(); i-- > 0;) {
    if (++coords[i] < sizes[i])
      return true;
    coords[i] = 0;
  }
  return false;
}

} // namespace

Result<MeshView>
MeshView::root(const std::vector<std::pair<std::string, int64_t>> &shape) {
  std::vector<Dim> dims;
  dims.reserve(shape.size());
  for (const auto &[name, size] : shape)
    dims.push_back(Dim{name, size, 0});
  // Strides only for sizes create() accepts; it reports the rest.
  int64_t stride = 1;
  for (size_t i = dims.size(); i-- > 0;) {
    dims[i].stride = stride;
    int64_t size = std::max<int64_t>(dims[i].size, 1);
    if (stride <= kMaxMeshRanks && size <= kMaxMeshRanks)
      stride *= size;
  }
  return create(0, std::move(dims));
}

namespace {
std::string describeShape(const std::vector<Dim> &dims) {
  std::string out = "{";
  for (size_t i = 0; i < dims.size(); ++i)
    out += (i ? ", " : "") + dims[i].name + "=" + std::to_string(dims[i].size);
  return out + "}";
}
} // namespace

Result<MeshView> MeshView::create(int64_t offset, std::vector<Dim> dims) {
  if (offset < 0)
    return valueError("mesh offset must be non-negative, got " +
                      std::to_string(offset));
  std::set<std::string, std::less<>> seen;
  // Products in 128 bits: no size or stride an input names can overflow.
  unsigned __int128 ranks = 1;
  unsigned __int128 last = static_cast<uint64_t>(offset);
  for (const Dim &dim : dims) {
    if (dim.name.empty())
      return valueError("mesh dimension names must not be empty");
    if (!seen.insert(dim.name).second)
      return valueError("duplicate mesh dimension '" + dim.name + "'");
    if (dim.size < 1)
      return valueError("mesh dimension '" + dim.name +
                        "' must have a positive size, got " +
                        std::to_string(dim.size));
    if (dim.stride < 0)
      return valueError("mesh dimension '" + dim.name +
                        "' must have a non-negative stride, got " +
                        std::to_string(dim.stride));
    ranks *= static_cast<uint64_t>(dim.size);
    if (ranks > static_cast<uint64_t>(kMaxMeshRanks))
      return valueError("a mesh holds at most " +
                        std::to_string(kMaxMeshRanks) + " ranks; " +
                        describeShape(dims) + " is larger");
    last += static_cast<unsigned __int128>(dim.size - 1) *
            static_cast<uint64_t>(dim.stride);
  }
  if (last >= static_cast<uint64_t>(kMaxMeshRanks))
    return valueError("mesh view (offset " + std::to_string(offset) + ", " +
                      describeShape(dims) +
                      ") reaches past rank " + std::to_string(kMaxMeshRanks - 1) +
                      ", the largest a mesh may hold");
  return MeshView(offset, std::move(dims));
}

int64_t MeshView::maxRank() const {
  int64_t last = offsetValue;
  for (const Dim &dim : dimList)
    last += (dim.size - 1) * dim.stride;
  return last;
}

std::vector<std::string> MeshView::names() const {
  std::vector<std::string> out;
  for (const Dim &dim : dimList)
    out.push_back(dim.name);
  return out;
}

std::vector<int64_t> MeshView::sizes() const {
  std::vector<int64_t> out;
  for (const Dim &dim : dimList)
    out.push_back(dim.size);
  return out;
}

std::vector<int64_t> MeshView::strides() const {
  std::vector<int64_t> out;
  for (const Dim &dim : dimList)
    out.push_back(dim.stride);
  return out;
}

std::optional<size_t> MeshView::find(std::string_view name) const {
  for (size_t i = 0; i < dimList.size(); ++i)
    if (dimList[i].name == name)
      return i;
  return std::nullopt;
}

Result<size_t> MeshView::lookup(std::string_view name) const {
  if (auto index = find(name))
    return *index;
  return keyError("mesh has no dimension '" + std::string(name) +
                  "' (dimensions: " + joinNames(dimList) + ")");
}

int64_t MeshView::size() const {
  int64_t total = 1;
  for (const Dim &dim : dimList)
    total *= dim.size;
  return total;
}

Result<int64_t> MeshView::size(std::string_view name) const {
  auto index = lookup(name);
  if (!index)
    return index.error();
  return dimList[*index].size;
}

Result<int64_t> MeshView::size(const std::vector<std::string> &names) const {
  int64_t total = 1;
  for (const std::string &name : names) {
    auto dimSize = size(name);
    if (!dimSize)
      return dimSize;
    total *= *dimSize;
  }
  return total;
}

Result<int64_t> MeshView::rankAt(const std::vector<int64_t> &coords) const {
  if (coords.size() != dimList.size())
    return valueError("expected " + std::to_string(dimList.size()) +
                      " coordinates, got " + std::to_string(coords.size()));
  int64_t rank = offsetValue;
  for (size_t i = 0; i < coords.size(); ++i) {
    if (coords[i] < 0 || coords[i] >= dimList[i].size)
      return indexError("coordinate " + std::to_string(coords[i]) +
                        " out of range for dimension '" + dimList[i].name +
                        "' of size " + std::to_string(dimList[i].size));
    rank += coords[i] * dimList[i].stride;
  }
  return rank;
}

std::optional<std::vector<int64_t>> MeshView::coordsOf(int64_t rank) const {
  int64_t rest = rank - offsetValue;
  if (rest < 0)
    return std::nullopt;
  // Views derived from a row-major root have nested strides, so dividing by
  // the largest stride first recovers the coordinates; the result is checked,
  // and any other view falls back to a search.
  std::vector<size_t> order(dimList.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return dimList[a].stride > dimList[b].stride;
  });
  std::vector<int64_t> coords(dimList.size(), 0);
  for (size_t i : order) {
    const Dim &dim = dimList[i];
    if (dim.stride == 0 || dim.size == 1)
      continue;
    coords[i] = std::min(rest / dim.stride, dim.size - 1);
    rest -= coords[i] * dim.stride;
  }
  if (rest == 0)
    return coords;
  std::fill(coords.begin(), coords.end(), 0);
  std::vector<int64_t> dimSizes = sizes();
  do {
    if (*rankAt(coords) == rank)
      return coords;
  } while (nextCoords(coords, dimSizes));
  return std::nullopt;
}

std::vector<int64_t> MeshView::ranks() const {
  std::vector<int64_t> out;
  out.reserve(size());
  std::vector<int64_t> coords(dimList.size(), 0);
  std::vector<int64_t> dimSizes = sizes();
  do {
    out.push_back(*rankAt(coords));
  } while (nextCoords(coords, dimSizes));
  return out;
}

Result<MeshView> MeshView::slice(std::string_view name, int64_t index) const {
  auto found = lookup(name);
  if (!found)
    return found.error();
  const Dim &dim = dimList[*found];
  int64_t normalized = index < 0 ? index + dim.size : index;
  if (normalized < 0 || normalized >= dim.size)
    return indexError("index " + std::to_string(index) +
                      " out of range for dimension '" + dim.name +
                      "' of size " + std::to_string(dim.size));
  std::vector<Dim> dims = dimList;
  dims.erase(dims.begin() + *found);
  return MeshView(offsetValue + normalized * dim.stride, std::move(dims));
}

Result<MeshView> MeshView::slice(std::string_view name,
                                 const Range &range) const {
  auto found = lookup(name);
  if (!found)
    return found.error();
  const Dim &dim = dimList[*found];
  if (range.step < 1)
    return valueError("slice step for dimension '" + dim.name +
                      "' must be positive, got " + std::to_string(range.step));
  auto normalize = [&](std::optional<int64_t> bound, int64_t fallback) {
    if (!bound)
      return fallback;
    return *bound < 0 ? *bound + dim.size : *bound;
  };
  int64_t start = normalize(range.start, 0);
  int64_t stop = normalize(range.stop, dim.size);
  if (start < 0 || start >= dim.size || stop > dim.size || stop <= start)
    return indexError("range " + std::to_string(start) + ":" +
                      std::to_string(stop) + " out of range for dimension '" +
                      dim.name + "' of size " + std::to_string(dim.size));
  std::vector<Dim> dims = dimList;
  Dim &sliced = dims[*found];
  sliced.size = (stop - start + range.step - 1) / range.step;
  sliced.stride = dim.stride * range.step;
  return MeshView(offsetValue + start * dim.stride, std::move(dims));
}

Result<MeshView> MeshView::split(const SplitSpec &spec) const {
  // Which existing dims are split, and into what.
  std::vector<const std::vector<std::string> *> newNames(dimList.size(),
                                                         nullptr);
  for (const auto &[oldName, names] : spec.dims) {
    auto found = lookup(oldName);
    if (!found)
      return found.error();
    if (newNames[*found])
      return valueError("dimension '" + oldName + "' is split twice");
    if (names.empty())
      return valueError("dimension '" + oldName +
                        "' must be split into at least one name");
    newNames[*found] = &names;
  }

  std::set<std::string, std::less<>> sizeKeys;
  for (const auto &[name, size] : spec.sizes) {
    if (!sizeKeys.insert(name).second)
      return valueError("size of '" + name + "' given twice");
    if (size < 1)
      return valueError("size of '" + name + "' must be positive, got " +
                        std::to_string(size));
  }
  auto givenSize = [&](const std::string &name) -> std::optional<int64_t> {
    for (const auto &[key, size] : spec.sizes)
      if (key == name)
        return size;
    return std::nullopt;
  };

  std::vector<Dim> dims;
  std::set<std::string, std::less<>> seen;
  std::set<std::string, std::less<>> usedSizes;
  for (size_t i = 0; i < dimList.size(); ++i) {
    const Dim &old = dimList[i];
    if (!newNames[i]) {
      if (!seen.insert(old.name).second)
        return valueError("duplicate dimension name '" + old.name + "'");
      dims.push_back(old);
      continue;
    }
    const std::vector<std::string> &names = *newNames[i];
    std::vector<int64_t> sizes(names.size(), 0);
    int64_t known = 1;
    std::optional<size_t> unknown;
    for (size_t k = 0; k < names.size(); ++k) {
      if (names[k].empty())
        return valueError("dimension names must not be empty");
      if (!seen.insert(names[k]).second)
        return valueError("duplicate dimension name '" + names[k] + "'");
      if (auto size = givenSize(names[k])) {
        sizes[k] = *size;
        known *= *size;
        usedSizes.insert(names[k]);
      } else if (unknown) {
        return valueError("cannot infer the sizes of both '" + names[*unknown] +
                          "' and '" + names[k] + "' when splitting '" +
                          old.name + "': give all but one");
      } else {
        unknown = k;
      }
    }
    if (unknown) {
      if (old.size % known != 0)
        return valueError("sizes given for the split of '" + old.name +
                          "' (product " + std::to_string(known) +
                          ") do not divide its size " +
                          std::to_string(old.size));
      sizes[*unknown] = old.size / known;
    } else if (known != old.size) {
      return valueError("sizes given for the split of '" + old.name +
                        "' multiply to " + std::to_string(known) +
                        ", not its size " + std::to_string(old.size));
    }
    std::vector<Dim> split(names.size());
    int64_t stride = old.stride;
    for (size_t k = names.size(); k-- > 0;) {
      split[k] = Dim{names[k], sizes[k], stride};
      stride *= sizes[k];
    }
    dims.insert(dims.end(), split.begin(), split.end());
  }
  for (const auto &[name, size] : spec.sizes)
    if (!usedSizes.count(name))
      return valueError("size given for '" + name +
                        "', which is not a dimension created by this split");
  return MeshView(offsetValue, std::move(dims));
}

Result<MeshView> MeshView::rename(
    const std::vector<std::pair<std::string, std::string>> &renames) const {
  SplitSpec spec;
  for (const auto &[from, to] : renames)
    spec.dims.push_back({from, {to}});
  return split(spec);
}

bool MeshView::isDense() const {
  int64_t expected = 1;
  for (size_t i = dimList.size(); i-- > 0;) {
    if (dimList[i].size == 1)
      continue;
    if (dimList[i].stride != expected)
      return false;
    expected *= dimList[i].size;
  }
  return true;
}

Result<MeshView> MeshView::flatten(std::string_view name) const {
  if (name.empty())
    return valueError("flatten needs a non-empty dimension name");
  if (!isDense())
    return valueError("cannot flatten mesh " + layoutString() +
                      ": its ranks are not contiguous (flatten needs a dense "
                      "view)");
  return MeshView(offsetValue, {Dim{std::string(name), size(), 1}});
}

Result<std::vector<int64_t>>
MeshView::groupOf(int64_t rank, const std::vector<std::string> &dims) const {
  auto coords = coordsOf(rank);
  if (!coords)
    return indexError("rank " + std::to_string(rank) + " is not in mesh " +
                      layoutString());
  std::vector<size_t> varying;
  if (dims.empty()) {
    varying.resize(dimList.size());
    std::iota(varying.begin(), varying.end(), 0);
  }
  for (const std::string &name : dims) {
    auto found = lookup(name);
    if (!found)
      return found.error();
    if (std::find(varying.begin(), varying.end(), *found) != varying.end())
      return valueError("dimension '" + name + "' named twice");
    varying.push_back(*found);
  }
  std::vector<int64_t> groupSizes;
  for (size_t index : varying)
    groupSizes.push_back(dimList[index].size);
  std::vector<int64_t> groupCoords(varying.size(), 0);
  std::vector<int64_t> out;
  do {
    std::vector<int64_t> full = *coords;
    for (size_t k = 0; k < varying.size(); ++k)
      full[varying[k]] = groupCoords[k];
    out.push_back(*rankAt(full));
  } while (nextCoords(groupCoords, groupSizes));
  return out;
}

Result<int64_t>
MeshView::groupSize(const std::vector<std::string> &dims) const {
  if (dims.empty())
    return size();
  std::vector<size_t> seenDims;
  int64_t total = 1;
  for (const std::string &name : dims) {
    auto found = lookup(name);
    if (!found)
      return found.error();
    if (std::find(seenDims.begin(), seenDims.end(), *found) != seenDims.end())
      return valueError("dimension '" + name + "' named twice");
    seenDims.push_back(*found);
    total *= dimList[*found].size;
  }
  return total;
}

Result<std::vector<std::vector<int64_t>>>
MeshView::groups(const std::vector<std::string> &dims) const {
  std::vector<std::vector<int64_t>> out;
  std::set<int64_t> covered;
  for (int64_t rank : ranks()) {
    if (covered.count(rank))
      continue;
    auto group = groupOf(rank, dims);
    if (!group)
      return group.error();
    covered.insert(group->begin(), group->end());
    out.push_back(std::move(group).value());
  }
  return out;
}

std::string MeshView::shapeString() const {
  std::string out = "{";
  for (size_t i = 0; i < dimList.size(); ++i) {
    if (i)
      out += ", ";
    out += dimList[i].name + "=" + std::to_string(dimList[i].size);
  }
  return out + "}";
}

std::string MeshView::layoutString() const {
  std::string out = "offset=" + std::to_string(offsetValue);
  for (const Dim &dim : dimList)
    out += " " + dim.name + "=" + std::to_string(dim.size) + ":" +
           std::to_string(dim.stride);
  return out;
}

namespace {

/// A right-aligned text grid.
std::string renderGrid(const std::vector<std::vector<std::string>> &rows) {
  std::vector<size_t> widths;
  for (const auto &row : rows)
    for (size_t c = 0; c < row.size(); ++c) {
      if (widths.size() <= c)
        widths.push_back(0);
      widths[c] = std::max(widths[c], row[c].size());
    }
  std::ostringstream out;
  for (const auto &row : rows) {
    for (size_t c = 0; c < row.size(); ++c) {
      if (c)
        out << "  ";
      out << std::string(widths[c] - row[c].size(), ' ') << row[c];
    }
    out << "\n";
  }
  return out.str();
}

} // namespace

std::string MeshView::toTable() const {
  if (dimList.empty())
    return "rank " + std::to_string(offsetValue) + "\n";
  if (dimList.size() == 1) {
    std::vector<std::string> header{dimList[0].name}, body{"rank"};
    for (int64_t i = 0; i < dimList[0].size; ++i) {
      header.push_back(std::to_string(i));
      body.push_back(std::to_string(offsetValue + i * dimList[0].stride));
    }
    return renderGrid({header, body});
  }
  // The last two dims form a grid; every index of the outer dims gets one.
  size_t nOuter = dimList.size() - 2;
  const Dim &rowDim = dimList[nOuter];
  const Dim &colDim = dimList[nOuter + 1];
  std::vector<int64_t> outerSizes, outer(nOuter, 0);
  for (size_t i = 0; i < nOuter; ++i)
    outerSizes.push_back(dimList[i].size);
  std::string out;
  do {
    int64_t base = offsetValue;
    std::string title;
    for (size_t i = 0; i < nOuter; ++i) {
      base += outer[i] * dimList[i].stride;
      title +=
          (i ? ", " : "") + dimList[i].name + "=" + std::to_string(outer[i]);
    }
    if (!title.empty())
      out += (out.empty() ? "" : "\n") + title + ":\n";
    std::vector<std::vector<std::string>> rows;
    std::vector<std::string> header{rowDim.name + "\\" + colDim.name};
    for (int64_t c = 0; c < colDim.size; ++c)
      header.push_back(std::to_string(c));
    rows.push_back(header);
    for (int64_t r = 0; r < rowDim.size; ++r) {
      std::vector<std::string> row{std::to_string(r)};
      for (int64_t c = 0; c < colDim.size; ++c)
        row.push_back(
            std::to_string(base + r * rowDim.stride + c * colDim.stride));
      rows.push_back(row);
    }
    out += renderGrid(rows);
  } while (nextCoords(outer, outerSizes));
  return out;
}

} // namespace monarch::mesh
