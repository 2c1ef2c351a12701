#include "sim/app/sweep_grid.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <fstream>
#include <optional>
#include <sstream>

#include "sim/app/config_error.hpp"
#include "sim/app/csv_table.hpp"
#include "sim/app/json_file.hpp"
#include "sim/app/json_reader.hpp"
#include "sim/units/text_scan.hpp"

namespace fsdpsim::app {
namespace {

std::string trim(const std::string& s) {
  const auto begin = s.find_first_not_of(" \t");
  if (begin == std::string::npos) return "";
  const auto end = s.find_last_not_of(" \t");
  return s.substr(begin, end - begin + 1);
}

// Splits at commas that are not inside "quotes", [brackets] or {braces}, so a value may be a
// JSON array or object. A bracket, brace or quote left open (or closed that was never opened)
// is an error naming `where`: the text would otherwise become a string value or split wrongly.
std::vector<std::string> split_values(const std::string& text, const std::string& where) {
  std::vector<std::string> parts;
  std::string current;
  int depth = 0;
  bool in_string = false;
  bool escaped = false;
  for (const char c : text) {
    if (in_string) {
      current += c;
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == ',' && depth == 0) {
      parts.push_back(trim(current));
      current.clear();
      continue;
    }
    if (c == '"') in_string = true;
    if (c == '[' || c == '{') ++depth;
    if (c == ']' || c == '}') {
      if (depth == 0) {
        throw ConfigError(fmt::format("{}: '{}' closes a bracket that was not opened", where, c));
      }
      --depth;
    }
    current += c;
  }
  if (in_string || depth > 0) {
    throw ConfigError(fmt::format("{}: {} is not closed", where,
                                  in_string ? "a quoted string" : "a [bracket] or {brace}"));
  }
  parts.push_back(trim(current));
  return parts;
}

void check_key(const std::string& key, const std::string& where) {
  if (key.empty()) throw ConfigError(fmt::format("{}: empty key", where));
  std::size_t begin = 0;
  while (true) {
    const auto dot = key.find('.', begin);
    if (dot == begin || begin == key.size()) {
      throw ConfigError(fmt::format("{}: empty segment in key \"{}\"", where, key));
    }
    if (dot == std::string::npos) return;
    begin = dot + 1;
  }
}

// Throws when an axis lists a value twice (1 and 1.0 are the same number, and so are the preset
// "x" and {"preset": "x"} of a model or hardware key): the grid would run the same point twice.
// `where(i)` names value i for the message: the first value, in the order given, that repeats an
// earlier one. Sorted, not compared pairwise: every load of the scenario checks its sweep block,
// and a sweep loads it once per value, so a pairwise check made setting up a sweep of n values
// O(n^3) (3,000 values: 50 s).
template <typename Where>
void check_distinct_values(const std::vector<std::string>& keys,
                           const std::vector<nlohmann::json>& values, const Where& where) {
  // Under the keys that take a preset, a name is the object {"preset": name}
  // (scenario_json.cpp's --set does the same when it descends into one).
  // Copied only then: every load of the scenario checks its sweep block.
  std::vector<nlohmann::json> named_presets;
  for (std::size_t k = 0; k < keys.size(); ++k) {
    if (keys[k] != "model" && keys[k] != "hardware") continue;
    if (named_presets.empty()) named_presets = values;
    for (nlohmann::json& v : named_presets) {
      nlohmann::json& e = keys.size() == 1 ? v : v[k];
      if (e.is_string()) e = nlohmann::json{{"preset", e}};
    }
  }
  const std::vector<nlohmann::json>& compared = named_presets.empty() ? values : named_presets;
  std::vector<std::size_t> order(values.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  // nlohmann's < orders numbers by value across integer and float, as its == compares them.
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return compared[a] < compared[b]; });
  std::optional<std::size_t> first_repeat;
  std::size_t repeated = 0;  // the value first_repeat repeats
  for (std::size_t k = 1; k < order.size(); ++k) {
    if (compared[order[k]] == compared[order[k - 1]] &&
        (!first_repeat || order[k] < *first_repeat)) {
      first_repeat = order[k];
      repeated = order[k - 1];
    }
  }
  if (first_repeat) {
    const std::string value = values[*first_repeat].dump();
    const std::string earlier = values[repeated].dump();
    throw ConfigError(
        value == earlier
            ? fmt::format("{}: value {} is given twice; list each value once", where(*first_repeat),
                          value)
            : fmt::format("{}: values {} and {} are the same value; list each value once",
                          where(*first_repeat), earlier, value));
  }
  // Distinct values the CSV would write alike (1 and "1", "a\nb" and "a b"): their rows could not
  // be told apart, nor a value that never ran be named. (A tied axis's arrays are written as
  // JSON: distinct.)
  std::vector<std::string> labels;
  labels.reserve(values.size());
  for (const nlohmann::json& v : values) labels.push_back(csv_text(grid_value_label(v)));
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return labels[a] < labels[b]; });
  std::optional<std::pair<std::size_t, std::size_t>> alike;  // (earlier, later)
  for (std::size_t k = 1; k < order.size(); ++k) {
    const std::size_t a = std::min(order[k - 1], order[k]);
    const std::size_t b = std::max(order[k - 1], order[k]);
    if (labels[a] == labels[b] && (!alike || b < alike->second)) alike = std::make_pair(a, b);
  }
  if (alike) {
    throw ConfigError(fmt::format(
        "{}: values {} and {} are both written \"{}\" in the sweep's CSV, so their rows could "
        "not be told apart; give one of them",
        where(alike->second), values[alike->first].dump(), values[alike->second].dump(),
        escape_control_characters(labels[alike->first], "")));
  }
}

// A key that is null in every value is never set: the axis does nothing to it, which is a mistake
// to say rather than a key silently left at what the scenario has.
void check_every_key_set(const GridAxis& axis, const std::string& where) {
  for (std::size_t k = 0; k < axis.keys.size(); ++k) {
    bool set = false;
    for (std::size_t v = 0; v < axis.values.size() && !set; ++v)
      set = !axis.value_of(v, k).is_null();
    if (!set) {
      throw ConfigError(fmt::format(
          "{}: {} is null in every value, so the axis never sets it; leave it out of the axis",
          where, axis.keys[k]));
    }
  }
}

// The keys of an axis named `name` ("KEY" or "KEY1+KEY2+..."), each checked. Throws ConfigError
// naming `where` on an empty key or segment, or a key tied twice.
std::vector<std::string> axis_keys(const std::string& name, const std::string& where) {
  std::vector<std::string> keys = keys_of_grid_column(name);
  for (std::size_t k = 0; k < keys.size(); ++k) {
    keys[k] = trim(keys[k]);
    check_key(keys[k], where);
    // Keys no simulation reads: every point of such an axis would give the same result.
    const std::string& key = keys[k];
    if (key == "name" || key == "description" || key == "schema_version" || key == "expect" ||
        key.starts_with("expect.") || key.ends_with(".description")) {
      throw ConfigError(fmt::format(
          "{}: {} changes no simulated result (a scenario's name, description, schema version or "
          "expect block), so every point would be the same; sweep keys of model, hardware, "
          "training or fsdp",
          where, key));
    }
    if (std::find(keys.begin(), keys.begin() + static_cast<std::ptrdiff_t>(k), keys[k]) !=
        keys.begin() + static_cast<std::ptrdiff_t>(k)) {
      throw ConfigError(
          fmt::format("{}: the key \"{}\" is tied twice; list it once", where, keys[k]));
    }
  }
  return keys;
}

// For tied keys, a value must be an array of one value per key. An element may be null: it removes
// its key, as `--set KEY=null` does (scenario_json.cpp), so that the key's default holds at that
// point (FSDP1's backward_prefetch where the tied fsdp.version is 2).
void check_tied_value(const std::vector<std::string>& keys, const nlohmann::json& value,
                      const std::string& where, bool from_text) {
  if (keys.size() == 1) return;
  // --grid reads text that is not JSON as a string: an array that does not parse ends up here.
  if (from_text && value.is_string() && value.get<std::string>().starts_with("[")) {
    throw ConfigError(fmt::format(
        "{}: expected an array of {} values, one for each of {}, found text that is not valid "
        "JSON (numbers as JSON writes them, strings in double quotes)",
        where, keys.size(), fmt::join(keys, ", ")));
  }
  if (!value.is_array() || value.size() != keys.size()) {
    throw ConfigError(
        fmt::format("{}: expected an array of {} values, one for each of {}, found {}", where,
                    keys.size(), fmt::join(keys, ", "),
                    value.is_array() ? fmt::format("an array of {}", value.size()) : value.dump()));
  }
}

// A key both axes set, if any.
std::optional<std::string> shared_key(const GridAxis& a, const GridAxis& b) {
  for (const std::string& key : b.keys) {
    if (std::find(a.keys.begin(), a.keys.end(), key) != a.keys.end()) return key;
  }
  return std::nullopt;
}

// How an error names a --grid option: as given, or its first characters when it is long (a list
// of thousands of values would otherwise be repeated whole in the message; the message names the
// value at fault).
std::string grid_option_in_message(const std::string& option) {
  constexpr std::size_t kShown = 80;
  if (option.size() <= kShown) return fmt::format("--grid \"{}\"", option);
  std::size_t cut = kShown - 3;
  while (cut > 0 && (static_cast<unsigned char>(option[cut]) & 0xC0U) == 0x80U) --cut;  // UTF-8
  return fmt::format("--grid \"{}...\" ({} bytes)", option.substr(0, cut), option.size());
}

}  // namespace

std::string GridAxis::name() const { return fmt::format("{}", fmt::join(keys, "+")); }

std::string GridAxis::where() const { return origin == "--grid" ? "--grid " + name() : origin; }

std::vector<std::string> grid_axis_names(const std::vector<GridAxis>& axes) {
  std::vector<std::string> names;
  for (const GridAxis& axis : axes) names.push_back(axis.name());
  return names;
}

std::vector<std::string> keys_of_grid_column(const std::string& name) {
  std::vector<std::string> keys;
  std::size_t begin = 0;
  while (true) {
    const std::size_t plus = name.find('+', begin);
    keys.push_back(name.substr(begin, plus == std::string::npos ? plus : plus - begin));
    if (plus == std::string::npos) return keys;
    begin = plus + 1;
  }
}

GridAxis parse_grid_option(const std::string& option) {
  const std::string where = grid_option_in_message(option);
  const auto eq = option.find('=');
  if (eq == std::string::npos) {
    throw ConfigError(
        fmt::format("{}: expected KEY=V1,V2,..., e.g. --grid training.micro_batch=1,2,4", where));
  }
  GridAxis axis;
  axis.keys = axis_keys(trim(option.substr(0, eq)), where);
  axis.origin = "--grid";
  const std::string list = option.substr(eq + 1);
  if (trim(list).empty()) throw ConfigError(fmt::format("{}: no values after '='", where));
  for (const std::string& text : split_values(list, where)) {
    if (text.empty()) throw ConfigError(fmt::format("{}: empty value in the list", where));
    axis.values.push_back(parse_inline_value(text, where));
    check_tied_value(axis.keys, axis.values.back(), fmt::format("{}: value {}", where, text),
                     /*from_text=*/true);
  }
  check_distinct_values(axis.keys, axis.values, [&](std::size_t) { return where; });
  check_every_key_set(axis, where);
  return axis;
}

std::vector<GridAxis> parse_sweep_block(const nlohmann::json& block, const std::string& file,
                                        const std::vector<std::string>& file_order) {
  // An empty block is refused as an empty --grid is: a sweep of nothing is a mistake.
  if (!block.is_object() || block.empty()) {
    throw ConfigError(
        file, "/sweep",
        fmt::format("expected an object of KEY: [values], found {}", describe_json_type(block)));
  }
  std::vector<std::string> keys;
  for (const std::string& k : file_order) {
    if (block.contains(k) && std::find(keys.begin(), keys.end(), k) == keys.end())
      keys.push_back(k);
  }
  for (const auto& [k, unused] : block.items()) {
    if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
  }
  std::vector<GridAxis> axes;
  for (const std::string& key : keys) {
    const std::string path = fmt::format("/sweep/{}", key);
    const nlohmann::json& values = block.at(key);
    if (!values.is_array() || values.empty()) {
      throw ConfigError(file, path,
                        fmt::format("expected a non-empty array of values, found {}",
                                    describe_json_type(values)));
    }
    GridAxis axis;
    axis.keys = axis_keys(key, fmt::format("{}: {}", file, path));
    axis.origin = fmt::format("{}: {}", file, path);
    for (std::size_t i = 0; i < values.size(); ++i) {
      if (values[i].is_null())
        throw ConfigError(file, fmt::format("{}/{}", path, i), "null is not a value");
      check_tied_value(axis.keys, values[i], fmt::format("{}: {}/{}", file, path, i),
                       /*from_text=*/false);
      axis.values.push_back(values[i]);
    }
    check_distinct_values(axis.keys, axis.values,
                          [&](std::size_t i) { return fmt::format("{}: {}/{}", file, path, i); });
    check_every_key_set(axis, fmt::format("{}: {}", file, path));
    for (const GridAxis& earlier : axes) {
      if (const std::optional<std::string> shared = shared_key(earlier, axis)) {
        throw ConfigError(file, path,
                          fmt::format("\"{}\" is swept by /sweep/{} too; give each key one axis "
                                      "(tie keys that vary together as KEY1+KEY2)",
                                      *shared, earlier.name()));
      }
    }
    axes.push_back(std::move(axis));
  }
  return axes;
}

std::vector<std::string> sweep_keys_in_file_order(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in) return {};
  std::stringstream buffer;
  buffer << in.rdbuf();
  const nlohmann::ordered_json document =
      nlohmann::ordered_json::parse(buffer.str(), nullptr, /*allow_exceptions=*/false);
  if (document.is_discarded() || !document.is_object()) return {};
  const auto it = document.find("sweep");
  if (it == document.end() || !it->is_object()) return {};
  std::vector<std::string> keys;
  for (const auto& [k, unused] : it->items()) keys.push_back(k);
  return keys;
}

std::vector<GridAxis> combine_axes(std::vector<GridAxis> file_axes,
                                   const std::vector<GridAxis>& command_line_axes) {
  for (std::size_t i = 0; i < command_line_axes.size(); ++i) {
    for (std::size_t j = 0; j < i; ++j) {
      const std::optional<std::string> key = shared_key(command_line_axes[j], command_line_axes[i]);
      if (!key) continue;
      if (command_line_axes[j].keys.size() == 1 && command_line_axes[i].keys.size() == 1) {
        throw ConfigError(fmt::format(
            "--grid {}: the key is given twice; list every value in one --grid {}=V1,V2,...", *key,
            *key));
      }
      throw ConfigError(
          fmt::format("--grid {}: \"{}\" is swept by --grid {} too; give each key "
                      "one axis",
                      command_line_axes[i].name(), *key, command_line_axes[j].name()));
    }
  }
  std::vector<GridAxis> axes = std::move(file_axes);
  for (const GridAxis& axis : command_line_axes) {
    const auto same = std::find_if(axes.begin(), axes.end(),
                                   [&](const GridAxis& a) { return a.keys == axis.keys; });
    if (same != axes.end()) {
      *same = axis;
      continue;
    }
    for (const GridAxis& a : axes) {
      if (const std::optional<std::string> key = shared_key(a, axis)) {
        throw ConfigError(fmt::format(
            "--grid {}: \"{}\" is swept by {} as {}; a --grid replaces a file's axis only for "
            "the same keys in the same order",
            axis.name(), *key, a.origin, a.name()));
      }
    }
    axes.push_back(axis);
  }
  return axes;
}

std::int64_t grid_point_count(const std::vector<GridAxis>& axes) {
  std::int64_t count = 1;
  for (const GridAxis& axis : axes) {
    count *= static_cast<std::int64_t>(axis.values.size());
    if (count > kMaxGridPoints) {
      std::vector<std::string> sizes;
      for (const GridAxis& a : axes)
        sizes.push_back(fmt::format("{} {}", a.values.size(), a.name()));
      throw ConfigError(
          fmt::format("the grid ({}) has more than {} points; split it into several sweeps",
                      fmt::join(sizes, " x "), kMaxGridPoints));
    }
  }
  return count;
}

std::vector<std::size_t> grid_coordinates(const std::vector<GridAxis>& axes, std::int64_t index) {
  std::vector<std::size_t> coordinates(axes.size(), 0);
  auto rest = static_cast<std::size_t>(index);
  for (std::size_t i = axes.size(); i-- > 0;) {
    coordinates[i] = rest % axes[i].values.size();
    rest /= axes[i].values.size();
  }
  return coordinates;
}

std::vector<std::string> axis_value_overrides(const GridAxis& axis, std::size_t v) {
  std::vector<std::string> overrides;
  for (std::size_t k = 0; k < axis.keys.size(); ++k)
    overrides.push_back(fmt::format("{}={}", axis.keys[k], axis.value_of(v, k).dump()));
  return overrides;
}

std::vector<std::string> grid_point_overrides(const std::vector<GridAxis>& axes,
                                              std::int64_t index) {
  const std::vector<std::size_t> c = grid_coordinates(axes, index);
  std::vector<std::string> overrides;
  for (std::size_t i = 0; i < axes.size(); ++i) {
    for (std::string& o : axis_value_overrides(axes[i], c[i])) overrides.push_back(std::move(o));
  }
  return overrides;
}

std::string grid_value_label(const nlohmann::json& value) {
  return value.is_string() ? value.get<std::string>() : value.dump();
}

std::vector<std::string> grid_point_labels(const std::vector<GridAxis>& axes, std::int64_t index) {
  const std::vector<std::size_t> c = grid_coordinates(axes, index);
  std::vector<std::string> labels;
  for (std::size_t i = 0; i < axes.size(); ++i)
    labels.push_back(grid_value_label(axes[i].values[c[i]]));
  return labels;
}

namespace {

// The most counts the dealing keeps, one per slice and axis value (4 bytes each: 64 MiB).
constexpr std::int64_t kMaxDealingCounts = std::int64_t{1} << 24;
// The most slices with room a point is weighed against: enough for every value of a grid of
// ordinary axes (twice their values), bounded so that dealing stays linear in the points.
constexpr std::size_t kMaxDealingWindow = 256;

// Calls visit(index, slice) for the points of the grid in index order, slice 1..n, as Shard says.
// The slices with room are a circular list; `held` counts, per axis value and slice, the points
// with that value dealt to the slice. Positions are kept as an odometer, last axis fastest.
template <typename Visit>
void deal_points(const std::vector<GridAxis>& axes, std::int64_t n, Visit visit) {
  const std::int64_t total = grid_point_count(axes);
  if (n >= total) {  // a point per slice, in index order, as the dealing below would
    for (std::int64_t index = 0; index < total; ++index) visit(index, index + 1);
    return;
  }
  std::vector<std::size_t> first_slot(axes.size());  // axis a's values: slots first_slot[a]...
  std::size_t values = 0;
  for (std::size_t a = 0; a < axes.size(); ++a) {
    first_slot[a] = values;
    values += axes[a].values.size();
  }
  if (n * static_cast<std::int64_t>(values) > kMaxDealingCounts) {
    throw ConfigError(fmt::format(
        "--shard: dealing a grid of {} axis values to {} slices keeps {} counts, more than {}; "
        "use at most {} slices",
        values, n, n * static_cast<std::int64_t>(values), kMaxDealingCounts,
        kMaxDealingCounts / static_cast<std::int64_t>(values)));
  }
  const auto slices = static_cast<std::size_t>(n);
  const std::int64_t share = total / n;  // slice s (0-based) holds one more for s < total % n
  const std::int64_t larger_shares = total % n;
  std::vector<std::uint32_t> held(values * slices, 0);
  std::vector<std::int64_t> dealt(slices, 0);
  std::vector<std::size_t> next(slices);
  std::vector<std::size_t> prev(slices);
  for (std::size_t s = 0; s < slices; ++s) {
    next[s] = (s + 1) % slices;
    prev[s] = (s + slices - 1) % slices;
  }
  std::size_t with_room = slices;
  std::size_t cursor = 0;  // the slice after the last one dealt to
  const std::size_t window = std::min(2 * values, kMaxDealingWindow);
  std::vector<std::size_t> positions(axes.size(), 0);
  std::vector<std::uint32_t*> columns(axes.size());  // the point's values' counts, by slice
  for (std::int64_t index = 0; index < total; ++index) {
    for (std::size_t a = 0; a < axes.size(); ++a) {
      columns[a] = held.data() + (first_slot[a] + positions[a]) * slices;
    }
    std::size_t best = cursor;
    std::uint64_t best_shared = UINT64_MAX;
    std::size_t s = cursor;
    for (std::size_t step = 0; step < std::min(window, with_room); ++step, s = next[s]) {
      std::uint64_t shared = 0;
      for (const std::uint32_t* column : columns) shared += column[s];
      if (shared < best_shared || (shared == best_shared && dealt[s] < dealt[best])) {
        best = s;
        best_shared = shared;
      }
    }
    visit(index, static_cast<std::int64_t>(best) + 1);
    for (std::uint32_t* column : columns) ++column[best];
    cursor = next[best];
    const auto index_of_best = static_cast<std::int64_t>(best);
    if (++dealt[best] == share + (index_of_best < larger_shares ? 1 : 0)) {  // full
      next[prev[best]] = next[best];
      prev[next[best]] = prev[best];
      --with_room;
    }
    for (std::size_t a = axes.size(); a-- > 0;) {
      if (++positions[a] < axes[a].values.size()) break;
      positions[a] = 0;
    }
  }
}

}  // namespace

std::vector<std::int64_t> Shard::indices(const std::vector<GridAxis>& axes) const {
  std::vector<std::int64_t> out;
  deal_points(axes, n, [&](std::int64_t index, std::int64_t slice) {
    if (slice == k) out.push_back(index);
  });
  return out;
}

std::int64_t Shard::slice_of(const std::vector<GridAxis>& axes, std::int64_t index) const {
  std::int64_t found = 0;
  deal_points(axes, n, [&](std::int64_t i, std::int64_t slice) {
    if (i == index) found = slice;
  });
  return found;
}

Shard parse_shard(const std::string& text) {
  const auto fail = [&]() -> Shard {
    throw ConfigError(fmt::format(
        "--shard \"{}\": expected K/N with 1 <= K <= N, e.g. --shard 3/8 for the third of 8 slices",
        text));
  };
  const auto slash = text.find('/');
  if (slash == std::string::npos) return fail();
  Shard s;
  const char* begin = text.data();
  const char* mid = begin + slash;
  const char* end = begin + text.size();
  const auto k = std::from_chars(begin, mid, s.k);
  const auto n = std::from_chars(mid + 1, end, s.n);
  if (k.ec != std::errc{} || k.ptr != mid || n.ec != std::errc{} || n.ptr != end) return fail();
  if (s.k < 1 || s.n < 1 || s.k > s.n) return fail();
  return s;
}

std::string sweep_fingerprint(const nlohmann::json& base_scenario,
                              const std::vector<GridAxis>& axes,
                              std::vector<std::string> named_files) {
  // FNV-1a 64: offset basis 14695981039346656037, prime 1099511628211.
  std::uint64_t hash = 14695981039346656037ULL;
  const auto add = [&hash](const std::string& text) {
    for (const char c : text) {
      hash ^= static_cast<unsigned char>(c);
      hash *= 1099511628211ULL;
    }
    hash ^= 0xffU;  // a separator no JSON text holds, so "ab"+"c" and "a"+"bc" differ
    hash *= 1099511628211ULL;
  };
  nlohmann::json scenario = base_scenario;
  if (scenario.is_object()) scenario.erase("sweep");
  add(scenario.dump());  // objects are dumped with their keys sorted
  for (const GridAxis& axis : axes) {
    add(axis.name());
    for (const nlohmann::json& value : axis.values) add(value.dump());
  }
  std::sort(named_files.begin(), named_files.end());
  for (const std::string& content : named_files) add(content);
  return fmt::format("{:016x}", hash);
}

}  // namespace fsdpsim::app
