// The grid of a what-if sweep: axes of scenario keys with lists of values, and the points of their
// Cartesian product as `--set KEY=VALUE` overrides. Axes come from a scenario's optional `sweep`
// block (file order) and from `--grid KEY=V1,V2,...` options (command-line order); the first axis
// varies slowest, the last fastest, so point 0 is every axis's first value. An axis may tie keys
// together (`--grid 'KEY1+KEY2=[A1,A2],[B1,B2]'`, `"KEY1+KEY2": [[A1, A2], [B1, B2]]` in the
// block): each of its values sets every key, so keys that only make sense together (FSDP1's
// backward_prefetch beside fsdp.version 1, none beside 2) vary as one. The sweep's table has a
// column per axis, named and written as the axis is: "KEY1+KEY2", `[A1,A2]`.
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace fsdpsim::app {

struct GridAxis {
  // Dotted scenario keys, e.g. {"training.micro_batch"}; several when the axis ties them.
  std::vector<std::string> keys;
  // As apply_override would parse them; for tied keys each value is an array of one value per
  // key, in the keys' order.
  std::vector<nlohmann::json> values;
  std::string origin;  // "--grid" or "<file>: /sweep/<name>", for messages

  // The keys as written: joined by '+'.
  [[nodiscard]] std::string name() const;
  // The axis as the user wrote it, for messages: "--grid NAME", or the sweep block's origin.
  [[nodiscard]] std::string where() const;
  // What value `v` sets key `k` to.
  [[nodiscard]] const nlohmann::json& value_of(std::size_t v, std::size_t k) const {
    return keys.size() == 1 ? values[v] : values[v][k];
  }
};

// The axes' names, in order: the sweep table's grid columns.
std::vector<std::string> grid_axis_names(const std::vector<GridAxis>& axes);

// The keys of a grid column's name ("KEY" or "KEY1+KEY2"; no scenario key holds a '+').
std::vector<std::string> keys_of_grid_column(const std::string& name);

// Parses one `--grid KEY=V1,V2,...`. Values are split at commas outside quotes, brackets and
// braces, then parsed like --set values (JSON when valid JSON, else a string). For tied keys
// (`KEY1+KEY2=...`) each value is a JSON array of one value per key. Throws ConfigError on a
// missing '=', an empty key or key segment, a key tied twice, an empty value or an empty list, a
// tied value that is not such an array.
GridAxis parse_grid_option(const std::string& option);

// Parses a scenario's `sweep` block: an object of KEY (or KEY1+KEY2, tied, whose values are arrays
// of one value per key) -> non-empty array of values. `file_order`
// lists the block's keys as they appear in the file (see sweep_keys_in_file_order); keys absent
// from it follow in alphabetical order. Throws ConfigError naming `file` and the JSON path.
std::vector<GridAxis> parse_sweep_block(const nlohmann::json& block, const std::string& file,
                                        const std::vector<std::string>& file_order);

// The keys of the top-level "sweep" object of a JSON file in the order they are written (the
// parsed scenario keeps keys sorted). Empty if the file has no sweep object or cannot be read.
std::vector<std::string> sweep_keys_in_file_order(const std::filesystem::path& file);

// File axes first, then the command line's; a command-line axis for the keys a file axis sweeps
// replaces the file's values in place. Throws ConfigError if two axes share a key otherwise (the
// command line names one key twice, a command-line axis ties a key of a file axis to other keys
// than the file ties it to, two file axes share one).
std::vector<GridAxis> combine_axes(std::vector<GridAxis> file_axes,
                                   const std::vector<GridAxis>& command_line_axes);

// The most points a sweep runs: each is a simulation, and its table is held in memory.
inline constexpr std::int64_t kMaxGridPoints = 10'000'000;

// Number of points of the Cartesian product (1 for no axes). Throws ConfigError above
// kMaxGridPoints.
std::int64_t grid_point_count(const std::vector<GridAxis>& axes);

// The value index of each axis at point `index` (mixed radix, last axis fastest).
std::vector<std::size_t> grid_coordinates(const std::vector<GridAxis>& axes, std::int64_t index);

// The overrides value `v` of `axis` makes, "KEY=<JSON value>", one per key.
std::vector<std::string> axis_value_overrides(const GridAxis& axis, std::size_t v);

// The point's overrides, "KEY=<JSON value>", axis by axis.
std::vector<std::string> grid_point_overrides(const std::vector<GridAxis>& axes,
                                              std::int64_t index);

// The point's values as people read them (strings unquoted, anything else as compact JSON, a tied
// axis's array too), in axis order.
std::vector<std::string> grid_point_labels(const std::vector<GridAxis>& axes, std::int64_t index);
std::string grid_value_label(const nlohmann::json& value);

// The id of a sweep, kSweepIdLength hexadecimal digits: a 64-bit FNV-1a hash (Fowler, Noll and
// Vo; the public-domain reference parameters) of the scenario as the points start from, every
// --set applied and its `sweep` block left out, of the axes' keys and values in order, and of the
// contents of the preset and calibration files the points name (`named_files`, in any order:
// they are hashed sorted, so where a checkout lives does not matter). Two runs of the same sweep,
// sharded or not, get the same id; a change to the scenario, the --set options, the grid or a
// named preset or profile changes it.
inline constexpr std::size_t kSweepIdLength = 16;
std::string sweep_fingerprint(const nlohmann::json& base_scenario,
                              const std::vector<GridAxis>& axes,
                              std::vector<std::string> named_files);

// `--shard K/N`: this process runs slice K of N. The grid's points are dealt in index order, each
// to the slice that holds the fewest points sharing any of its axis values so far (the sum over
// its axes), looked for among the next slices with room after the last one dealt to (up to
// twice the grid's axis values, at most 256, of them), fewer points breaking ties, then turn.
// A slice has room below its share: the grid's size / N, one more for the first size % N slices.
// So every slice gets the grid's size / N points, rounded down or up, and of each value of any
// axis about the share its size makes, where index % N would give each slice one value of a last
// axis of N values (one micro-batch size each, the slowest slice all of the slowest). Throws
// ConfigError where N slices x the grid's axis values pass 2^24 counts (and N < the grid's size).
struct Shard {
  std::int64_t k = 1;  // 1-based
  std::int64_t n = 1;
  // This slice's points of the grid, in index order.
  [[nodiscard]] std::vector<std::int64_t> indices(const std::vector<GridAxis>& axes) const;
  // The slice (1..n) that runs point `index` of the grid.
  [[nodiscard]] std::int64_t slice_of(const std::vector<GridAxis>& axes, std::int64_t index) const;
};

// Parses "K/N" with 1 <= K <= N. Throws ConfigError otherwise.
Shard parse_shard(const std::string& text);

}  // namespace fsdpsim::app
