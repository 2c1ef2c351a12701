// Which values of a sweep's grid are bad input rather than infeasible configurations: a value the
// loader refused as malformed (misspelt, of the wrong type, out of range) wherever the grid put
// it, while the points that differ from it only in that value ran. A point refused for a relation
// between keys (a global batch the micro batch does not divide, a profile of another GPU), which
// ever key the grid varies, is an infeasible configuration, a skipped row and nothing more (an
// infeasible scenario is a result that a sweep records).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "sim/app/csv_table.hpp"

namespace fsdpsim::app {

// The reason of a point that needed more host memory than the machine gives the process: a
// skipped row, but not an invalid scenario.
inline constexpr std::string_view kOutOfHostMemoryReason =
    "out of host memory: simulating this point needs more memory than the machine gives the "
    "process";

// A grid value that no point could simulate, refused as malformed: every point with it is
// skipped as an invalid scenario (not for want of host memory), at least one of them refused at
// the value's own key as malformed (its reason "PATH: expected ...", "PATH: unknown key..." or
// "PATH: required key is missing", PATH the axis key's or below it, or any tied key's for an
// axis of tied keys), and at least one of them has a simulated
// neighbour that differs only in this axis's value. Judged on the points present (merge
// --allow-gaps may lack some); empty for a table whose labels do not follow its indices, that lacks
// a value altogether, or that holds no simulated point at all (reported as a whole instead).
struct UnusableGridValue {
  std::string key;
  std::string value;
  std::size_t points = 0;
  std::string reason;  // the first point's refused as malformed
};
std::vector<UnusableGridValue> unusable_grid_values(const SweepTable& table);

// "error: KEY=VALUE: none of its N points could be simulated (the first: REASON)" lines, one per
// value, then a line saying the outputs were written all the same; empty when there is none.
std::string unusable_grid_values_text(const std::vector<UnusableGridValue>& values);

}  // namespace fsdpsim::app
