//===- MeshViewTest.cpp - Rules of DESIGN.md §6.1 -------------------------===//

#include "monarch/mesh/MeshView.h"

#include <gtest/gtest.h>

using namespace monarch::mesh;

namespace {

MeshView rootOf(std::vector<std::pair<std::string, int64_t>> shape) {
  auto view = MeshView::root(shape);
  EXPECT_TRUE(view.ok()) << view.error().message;
  return *view;
}

/// Asserts failure of a given kind whose message mentions `needle`.
template <typename T>
void expectError(const Result<T> &result, ErrorKind kind,
                 const std::string &needle) {
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().kind, kind)
      << errorKindName(result.error().kind) << ": " << result.error().message;
  EXPECT_NE(result.error().message.find(needle), std::string::npos)
      << result.error().message;
}

SplitSpec worked(std::vector<std::pair<std::string, int64_t>> sizes) {
  SplitSpec spec;
  spec.dims = {{"host", {"dp", "pp"}}, {"gpu", {"tp"}}};
  spec.sizes = std::move(sizes);
  return spec;
}

} // namespace

TEST(MeshView, RootIsRowMajor) {
  MeshView mesh = rootOf({{"host", 2}, {"gpu", 4}});
  EXPECT_EQ(mesh.sizes(), (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(mesh.strides(), (std::vector<int64_t>{4, 1}));
  EXPECT_EQ(mesh.size(), 8);
  EXPECT_EQ(*mesh.size("gpu"), 4);
  EXPECT_EQ(*mesh.size(std::vector<std::string>{"host", "gpu"}), 8);
  EXPECT_EQ(*mesh.rankAt({1, 2}), 6);
  EXPECT_EQ(*mesh.coordsOf(6), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(mesh.ranks(), (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_TRUE(mesh.isDense());
  EXPECT_EQ(mesh.shapeString(), "{host=2, gpu=4}");
}

TEST(MeshView, RootRejectsBadShapes) {
  expectError(MeshView::root({{"gpu", 0}}), ErrorKind::Value, "positive");
  expectError(MeshView::root({{"gpu", 2}, {"gpu", 2}}), ErrorKind::Value,
              "duplicate");
  expectError(MeshView::root({{"", 2}}), ErrorKind::Value, "empty");
}

TEST(MeshView, UnknownDimNamesIt) {
  MeshView mesh = rootOf({{"host", 2}, {"gpu", 4}});
  expectError(mesh.size("tp"), ErrorKind::Key, "'tp'");
  expectError(mesh.slice("tp", 0), ErrorKind::Key, "host, gpu");
}

TEST(MeshView, WorkedSplitExample) {
  MeshView mesh = rootOf({{"host", 60}, {"gpu", 24}});
  auto split = mesh.split(worked({{"pp", 4}}));
  ASSERT_TRUE(split.ok()) << split.error().message;
  EXPECT_EQ(split->names(), (std::vector<std::string>{"dp", "pp", "tp"}));
  EXPECT_EQ(split->sizes(), (std::vector<int64_t>{15, 4, 24}));
  EXPECT_EQ(split->strides(), (std::vector<int64_t>{96, 24, 1}));
  EXPECT_EQ(split->ranks(), mesh.ranks());
}

TEST(MeshView, SplitInfersTheOtherSize) {
  MeshView mesh = rootOf({{"host", 60}, {"gpu", 24}});
  auto dp4 = mesh.split(worked({{"dp", 4}}));
  ASSERT_TRUE(dp4.ok()) << dp4.error().message;
  EXPECT_EQ(dp4->sizes(), (std::vector<int64_t>{4, 15, 24}));
  EXPECT_EQ(dp4->strides(), (std::vector<int64_t>{360, 24, 1}));
  auto dp60 = mesh.split(worked({{"dp", 60}}));
  ASSERT_TRUE(dp60.ok()) << dp60.error().message;
  EXPECT_EQ(dp60->sizes(), (std::vector<int64_t>{60, 1, 24}));
  EXPECT_EQ(dp60->strides(), (std::vector<int64_t>{24, 24, 1}));
}

TEST(MeshView, SplitErrors) {
  MeshView mesh = rootOf({{"host", 60}, {"gpu", 24}});
  expectError(mesh.split(worked({{"pp", 7}})), ErrorKind::Value,
              "do not divide");
  expectError(mesh.split(worked({})), ErrorKind::Value, "cannot infer");
  expectError(mesh.split(worked({{"dp", 2}, {"pp", 2}})), ErrorKind::Value,
              "multiply to 4");
  expectError(mesh.split(worked({{"pp", 4}, {"zz", 2}})), ErrorKind::Value,
              "'zz'");
  SplitSpec duplicate;
  duplicate.dims = {{"host", {"gpu"}}};
  expectError(mesh.split(duplicate), ErrorKind::Value, "duplicate");
  SplitSpec unknown;
  unknown.dims = {{"rack", {"a", "b"}}};
  expectError(mesh.split(unknown), ErrorKind::Key, "'rack'");
  SplitSpec twice;
  twice.dims = {{"host", {"a"}}, {"host", {"b"}}};
  expectError(mesh.split(twice), ErrorKind::Value, "split twice");
}

TEST(MeshView, RenameIsASplitIntoOneName) {
  MeshView mesh = rootOf({{"host", 4}, {"gpu", 4}});
  auto renamed = mesh.rename({{"host", "dp"}, {"gpu", "tp"}});
  ASSERT_TRUE(renamed.ok()) << renamed.error().message;
  EXPECT_EQ(renamed->names(), (std::vector<std::string>{"dp", "tp"}));
  EXPECT_EQ(renamed->strides(), mesh.strides());
  expectError(mesh.rename({{"host", "gpu"}}), ErrorKind::Value, "duplicate");
}

TEST(MeshView, SliceByIndexDropsTheDim) {
  MeshView mesh = rootOf({{"host", 2}, {"gpu", 4}});
  auto slice = mesh.slice("host", 1);
  ASSERT_TRUE(slice.ok());
  EXPECT_EQ(slice->offset(), 4);
  EXPECT_EQ(slice->names(), (std::vector<std::string>{"gpu"}));
  EXPECT_EQ(slice->ranks(), (std::vector<int64_t>{4, 5, 6, 7}));
  EXPECT_EQ(mesh.slice("gpu", -1)->ranks(), (std::vector<int64_t>{3, 7}));
  expectError(mesh.slice("host", 2), ErrorKind::Index, "out of range");
  expectError(mesh.slice("host", -3), ErrorKind::Index, "out of range");
}

TEST(MeshView, SliceByRangeKeepsTheDim) {
  MeshView mesh = rootOf({{"host", 2}, {"gpu", 4}});
  auto slice = mesh.slice("gpu", Range{1, 3, 1});
  ASSERT_TRUE(slice.ok());
  EXPECT_EQ(slice->sizes(), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(slice->ranks(), (std::vector<int64_t>{1, 2, 5, 6}));
  EXPECT_FALSE(slice->isDense());
  auto stepped = mesh.slice("gpu", Range{std::nullopt, std::nullopt, 2});
  ASSERT_TRUE(stepped.ok());
  EXPECT_EQ(stepped->ranks(), (std::vector<int64_t>{0, 2, 4, 6}));
  EXPECT_EQ(*stepped->coordsOf(6), (std::vector<int64_t>{1, 1}));
  EXPECT_FALSE(stepped->coordsOf(5).has_value());
  expectError(mesh.slice("gpu", Range{2, 5, 1}), ErrorKind::Index,
              "out of range");
  expectError(mesh.slice("gpu", Range{3, 3, 1}), ErrorKind::Index,
              "out of range");
  expectError(mesh.slice("gpu", Range{0, 2, 0}), ErrorKind::Value, "step");
}

TEST(MeshView, FlattenDenseAndSparse) {
  MeshView mesh = rootOf({{"host", 2}, {"gpu", 4}});
  auto flat = mesh.flatten("all");
  ASSERT_TRUE(flat.ok());
  EXPECT_EQ(flat->sizes(), (std::vector<int64_t>{8}));
  EXPECT_EQ(flat->ranks(), mesh.ranks());
  // A slice of one host is dense too (offset 4, ranks 4..7).
  auto host1 = mesh.slice("host", 1)->flatten("g");
  ASSERT_TRUE(host1.ok());
  EXPECT_EQ(host1->ranks(), (std::vector<int64_t>{4, 5, 6, 7}));
  // A column of the grid is not.
  expectError(mesh.slice("gpu", 1)->flatten("h"), ErrorKind::Value,
              "not contiguous");
  expectError(mesh.slice("gpu", Range{0, 2, 1})->flatten("x"), ErrorKind::Value,
              "dense");
}

TEST(MeshView, CommunicatorGroups) {
  MeshView mesh = rootOf({{"host", 2}, {"gpu", 2}});
  EXPECT_EQ(*mesh.groupOf(3, {"gpu"}), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(*mesh.groupOf(3, {"host"}), (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(*mesh.groupOf(3, {}), (std::vector<int64_t>{0, 1, 2, 3}));
  auto groups = mesh.groups({"host"});
  ASSERT_TRUE(groups.ok());
  EXPECT_EQ(*groups, (std::vector<std::vector<int64_t>>{{0, 2}, {1, 3}}));
  expectError(mesh.groupOf(0, {"gpu", "gpu"}), ErrorKind::Value, "twice");
  expectError(mesh.groupOf(0, {"rack"}), ErrorKind::Key, "'rack'");
  expectError(mesh.slice("host", 0)->groupOf(3, {"gpu"}), ErrorKind::Index,
              "not in mesh");
}

TEST(MeshView, ToTableGrids) {
  MeshView mesh = rootOf({{"host", 2}, {"gpu", 3}});
  EXPECT_EQ(mesh.toTable(), "host\\gpu  0  1  2\n"
                            "       0  0  1  2\n"
                            "       1  3  4  5\n");
  EXPECT_EQ(mesh.slice("host", 1)->toTable(), " gpu  0  1  2\n"
                                              "rank  3  4  5\n");
  SplitSpec spec;
  spec.dims = {{"host", {"dp", "pp"}}};
  spec.sizes = {{"pp", 2}};
  auto three = rootOf({{"host", 4}, {"gpu", 2}}).split(spec);
  ASSERT_TRUE(three.ok());
  EXPECT_EQ(three->toTable(), "dp=0:\n"
                              "pp\\gpu  0  1\n"
                              "     0  0  1\n"
                              "     1  2  3\n"
                              "\n"
                              "dp=1:\n"
                              "pp\\gpu  0  1\n"
                              "     0  4  5\n"
                              "     1  6  7\n");
}
