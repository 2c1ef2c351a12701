#include "sim/app/unusable_grid_values.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace fsdpsim::app {
namespace {

// A 3 x 2 grid, axes a (slowest) and b: a=x is refused at its own key wherever it is, a=y runs,
// a=z is skipped for want of host memory; b=q meets a=x's refusals and runs beside a=y.
SweepTable grid() {
  SweepTable t;
  t.grid_keys = {"a", "b"};
  const std::vector<std::pair<std::string, std::string>> labels = {
      {"x", "p"}, {"x", "q"}, {"y", "p"}, {"y", "q"}, {"z", "p"}, {"z", "q"}};
  for (std::size_t i = 0; i < labels.size(); ++i) {
    const auto& [a, b] = labels[i];
    SweepRow r;
    r.index = static_cast<std::int64_t>(i);
    r.labels = {a, b};
    r.status = a == "y" ? PointStatus::kOk : PointStatus::kSkipped;
    r.reason = a == "y"   ? ""
               : a == "z" ? std::string(kOutOfHostMemoryReason)
                          : "/a: expected one of y, z, found \"" + a + "\" (bad " + a + b + ")";
    t.rows.push_back(r);
  }
  return t;
}

TEST(UnusableGridValues, AValueRefusedAtItsOwnKeyWhereItsNeighboursRanIsNamed) {
  const SweepTable t = grid();
  const std::vector<UnusableGridValue> u = unusable_grid_values(t);
  ASSERT_EQ(u.size(), 1U) << unusable_grid_values_text(u);
  EXPECT_EQ(u[0].key, "a");
  EXPECT_EQ(u[0].value, "x");
  EXPECT_EQ(u[0].points, 2U);
  EXPECT_EQ(unusable_grid_values_text(u),
            "error: a=x: none of its 2 points could be simulated (the first: /a: expected one of "
            "y, z, found \"x\" (bad xp))\n"
            "the outputs were written with the points that could be simulated\n");
  EXPECT_EQ(unusable_grid_values_text({}), "");
}

// A relation between keys (a global batch the micro batch does not divide) makes an infeasible
// point, which a sweep records, whichever key it is refused at: no value is blamed for it.
TEST(UnusableGridValues, ARelationBetweenKeysIsAnInfeasiblePointNotBadInput) {
  SweepTable t = grid();
  for (SweepRow& r : t.rows) {
    if (r.labels[0] == "x") r.reason = "/c: 16 is not a multiple of x";
  }
  EXPECT_TRUE(unusable_grid_values(t).empty());
  for (SweepRow& r : t.rows) {
    if (r.labels[0] == "x") r.reason = "/a: 16 is not a multiple of x";
  }
  EXPECT_TRUE(unusable_grid_values(t).empty());
  // One point refused as malformed at the value's own key (or below it) is enough.
  t.rows[1].reason = "/a/inner: expected a number, found \"x\"";
  const std::vector<UnusableGridValue> u = unusable_grid_values(t);
  ASSERT_EQ(u.size(), 1U);
  EXPECT_EQ(u[0].reason, "/a/inner: expected a number, found \"x\"");
  // "/ab" is not under "/a".
  t.rows[1].reason = "/ab: expected a number, found \"x\"";
  EXPECT_TRUE(unusable_grid_values(t).empty());
  // An object value with a key of no scenario, and a null where the key has no default, are
  // malformed values too.
  t.rows[1].reason = "/a/n_layerz: unknown key; did you mean n_layers?";
  EXPECT_EQ(unusable_grid_values(t).size(), 1U);
  t.rows[1].reason = "/a: required key is missing";
  EXPECT_EQ(unusable_grid_values(t).size(), 1U);
}

// Part of a grid (merge --allow-gaps) is judged on the points present; a grid whose size is
// unknown (a table of an older fsdpsim) and lacks its last point, or whose labels do not follow
// the indices, is not judged.
TEST(UnusableGridValues, PartOfAGridIsJudgedOnItsPoints) {
  SweepTable t = grid();
  t.rows.pop_back();
  EXPECT_TRUE(unusable_grid_values(t).empty());
  t.grid_points = 6;
  t.rows.erase(t.rows.begin());  // (x, p)
  const std::vector<UnusableGridValue> partial = unusable_grid_values(t);
  ASSERT_EQ(partial.size(), 1U) << unusable_grid_values_text(partial);
  EXPECT_EQ(partial[0].points, 1U);
  std::swap(t.rows[0].labels, t.rows[1].labels);
  EXPECT_TRUE(unusable_grid_values(t).empty());
}

// A value and a reason that hold a line feed stay on the error's one line.
TEST(UnusableGridValues, TheErrorIsOneLinePerValue) {
  const std::string text =
      unusable_grid_values_text({{"a", "x\ny", 1, "/a: bad\nvalue"}, {"b", "z", 2, "/b: no"}});
  EXPECT_EQ(text,
            "error: a=x<U+000A>y: its one point could not be simulated ("
            "/a: bad<U+000A>value)\n"
            "error: b=z: none of its 2 points could be simulated (the first: /b: no)\n"
            "the outputs were written with the points that could be simulated\n");
}

// A column of tied keys is named as the axis ("v+p") and holds each value's array; a value is
// malformed where it is refused at any of the keys, and named as its column writes it.
TEST(UnusableGridValues, AnAxisOfTiedKeysIsRefusedAtAnyOfThem) {
  SweepTable t = grid();
  t.grid_keys = {"v+p", "b"};
  for (SweepRow& r : t.rows) {
    r.labels[0] = "[\"" + r.labels[0] + "\",1]";
    if (r.status == PointStatus::kSkipped && r.reason != kOutOfHostMemoryReason)
      r.reason = "/p: expected 2, found 1";
  }
  const std::vector<UnusableGridValue> u = unusable_grid_values(t);
  ASSERT_EQ(u.size(), 1U) << unusable_grid_values_text(u);
  EXPECT_EQ(u[0].key, "v+p");
  EXPECT_EQ(u[0].value, "[\"x\",1]");
  for (SweepRow& r : t.rows) {
    if (r.reason == "/p: expected 2, found 1") r.reason = "/v: expected y, found \"x\"";
  }
  EXPECT_EQ(unusable_grid_values(t).size(), 1U);
  // "/v+p" is no key's path, and a key that only starts like one is not it.
  for (SweepRow& r : t.rows) {
    if (r.reason == "/v: expected y, found \"x\"") r.reason = "/pp: expected 2, found 1";
  }
  EXPECT_TRUE(unusable_grid_values(t).empty());
}

}  // namespace
}  // namespace fsdpsim::app
