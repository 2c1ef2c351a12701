#include "sim/app/unusable_grid_values.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <set>

#include "sim/app/scenario.hpp"
#include "sim/app/sweep_grid.hpp"
#include "sim/units/text_scan.hpp"

namespace fsdpsim::app {

std::vector<UnusableGridValue> unusable_grid_values(const SweepTable& table) {
  const auto simulated = [](const SweepRow* r) {
    return r != nullptr && r->status != PointStatus::kSkipped;
  };
  const auto invalid = [](const SweepRow& r) {
    return r.status == PointStatus::kSkipped && r.reason != kOutOfHostMemoryReason;
  };
  std::vector<UnusableGridValue> out;
  if (std::none_of(table.rows.begin(), table.rows.end(),
                   [&](const SweepRow& r) { return simulated(&r); })) {
    return out;
  }
  // The grid's shape: each axis has as many values as distinct labels (a sweep refuses two
  // values written alike), the first axis varying slowest. Rows are placed by index; under merge
  // --allow-gaps some are missing, and a missing point is neither invalid nor simulated. A table
  // whose labels do not follow its indices (edited by hand), or that lacks a value altogether,
  // is not judged.
  const std::size_t axes = table.grid_keys.size();
  std::vector<std::set<std::string>> distinct(axes);
  std::int64_t last_index = -1;
  for (const SweepRow& r : table.rows) {
    for (std::size_t k = 0; k < axes; ++k) distinct[k].insert(r.labels[k]);
    last_index = std::max(last_index, r.index);
  }
  std::vector<std::size_t> stride(axes, 1);
  std::size_t points = 1;
  for (std::size_t k = axes; k-- > 0;) {
    stride[k] = points;
    points *= distinct[k].size();
  }
  const std::int64_t grid_points = table.grid_points > 0 ? table.grid_points : last_index + 1;
  if (static_cast<std::int64_t>(points) != grid_points) return out;
  std::vector<const SweepRow*> at(points, nullptr);
  std::vector<std::vector<std::optional<std::string>>> values(axes);
  for (std::size_t k = 0; k < axes; ++k) values[k].resize(distinct[k].size());
  for (const SweepRow& r : table.rows) {
    const auto i = static_cast<std::size_t>(r.index);
    if (r.index < 0 || i >= points || at[i] != nullptr) return out;
    at[i] = &r;
    for (std::size_t k = 0; k < axes; ++k) {
      std::optional<std::string>& value = values[k][(i / stride[k]) % values[k].size()];
      if (!value) value = r.labels[k];
      if (*value != r.labels[k]) return out;
    }
  }
  for (std::size_t k = 0; k < axes; ++k) {
    const std::size_t n = values[k].size();
    // The loader's messages start with the JSON path of what they refuse, and a malformed value
    // is refused as "PATH: expected ..., found ..." (JsonObjectReader's form), as an object with
    // an "unknown key" or a null that removed a "required key is missing"; a relation between
    // keys says what does not hold instead ("global_batch 12 is not a multiple of ...").
    // A column of tied keys ("KEY1+KEY2") is refused at any of its keys.
    std::vector<std::string> paths;
    for (const std::string& key : keys_of_grid_column(table.grid_keys[k]))
      paths.push_back(json_path_of(key));
    const auto malformed_here = [&paths](const SweepRow& r) {
      return std::any_of(paths.begin(), paths.end(), [&r](const std::string& path) {
        if (!r.reason.starts_with(path)) return false;
        const std::size_t rest = r.reason.find(": ", path.size());
        if (rest == std::string::npos || (rest != path.size() && r.reason[path.size()] != '/'))
          return false;
        const std::string_view what = std::string_view(r.reason).substr(rest + 2);
        return what.starts_with("expected ") || what.starts_with("unknown key") ||
               what.starts_with("required key is missing");
      });
    };
    for (std::size_t c = 0; c < n; ++c) {
      // The value's points, index by index: blocks of stride[k] points every n * stride[k].
      bool all_invalid = true;
      bool neighbour_simulated = false;
      std::size_t count = 0;
      const SweepRow* first = nullptr;  // the first refused at the value's own key
      for (std::size_t block = c * stride[k]; block < points && all_invalid;
           block += n * stride[k]) {
        for (std::size_t i = block; i < block + stride[k] && all_invalid; ++i) {
          if (at[i] == nullptr) continue;
          ++count;
          all_invalid = invalid(*at[i]);
          if (first == nullptr && malformed_here(*at[i])) first = at[i];
          for (std::size_t other = 0; other < n && !neighbour_simulated; ++other)
            neighbour_simulated =
                other != c && simulated(at[i - c * stride[k] + other * stride[k]]);
        }
      }
      if (all_invalid && neighbour_simulated && first != nullptr)
        out.push_back({table.grid_keys[k], *values[k][c], count, first->reason});
    }
  }
  return out;
}

std::string unusable_grid_values_text(const std::vector<UnusableGridValue>& values) {
  std::string out;
  for (const UnusableGridValue& v : values) {
    // One line per value, whatever its label and reason hold.
    out += fmt::format(
        "error: {}={}: {}{})\n", v.key, escape_control_characters(v.value, ""),
        v.points == 1
            ? std::string("its one point could not be simulated (")
            : fmt::format("none of its {} points could be simulated (the first: ", v.points),
        escape_control_characters(v.reason, ""));
  }
  if (!values.empty()) out += "the outputs were written with the points that could be simulated\n";
  return out;
}

}  // namespace fsdpsim::app
