#include "sim/app/json_reader.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <optional>

#include "sim/app/config_error.hpp"
#include "sim/app/json_file.hpp"

namespace fsdpsim::app {

std::size_t edit_distance(const std::string& a, const std::string& b) {
  // Optimal string alignment: insertions, deletions, substitutions and swaps of two adjacent
  // characters, one edit each, as a typist makes them ("no_snyc" is one edit from "no_sync").
  std::vector<std::size_t> before(b.size() + 1);  // row i - 2
  std::vector<std::size_t> previous(b.size() + 1);
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    before.swap(previous);
    previous.swap(row);
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      row[j] = std::min(
          {previous[j] + 1, row[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        row[j] = std::min(row[j], before[j - 2] + 1);
    }
  }
  return row[b.size()];
}

namespace {

// A key of a nested object given one level up ("gpus_per_node" in hardware for
// hardware.node.gpus_per_node): "child.key" for the one child object of `object`, documentation
// aside, that has `key`, else empty.
std::string key_of_one_child(const nlohmann::json& object, const std::string& key,
                             const std::set<std::string>& documentation) {
  std::string found;
  for (const auto& [child, value] : object.items()) {
    if (documentation.contains(child) || !value.is_object() || !value.contains(key)) continue;
    if (!found.empty()) return "";  // ambiguous
    found = child + "." + key;
  }
  return found;
}

}  // namespace

std::vector<std::string> split_dotted_key(const std::string& key) {
  std::vector<std::string> parts;
  std::size_t begin = 0;
  while (true) {
    const auto dot = key.find('.', begin);
    parts.push_back(key.substr(begin, dot == std::string::npos ? std::string::npos : dot - begin));
    if (dot == std::string::npos) return parts;
    begin = dot + 1;
  }
}

std::string pointer_token(const std::string& key) {
  std::string out;
  out.reserve(key.size());
  for (const char c : key) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}

namespace {

// A name as a user may have meant it: surrounding spaces dropped, lower case, and spaces and
// hyphens read as the underscores of fsdpsim's names ("Memory Fraction" is memory_fraction).
std::string loose_name(const std::string& name) {
  const auto first = name.find_first_not_of(" \t");
  if (first == std::string::npos) return "";
  const auto last = name.find_last_not_of(" \t");
  std::string out = name.substr(first, last - first + 1);
  for (char& c : out) {
    c = (c == ' ' || c == '-') ? '_'
                               : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

}  // namespace

std::string same_name_but_for_case(const std::string& word,
                                   const std::vector<std::string>& candidates) {
  const std::string loose = loose_name(word);
  for (const std::string& c : candidates) {
    if (loose_name(c) == loose) return c;
  }
  return "";
}

std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates) {
  // The same name but for case, spaces or hyphens: surely the one meant.
  if (std::string same = same_name_but_for_case(word, candidates); !same.empty()) return same;
  std::string best;
  std::size_t best_distance = std::max<std::size_t>(2, word.size() / 3) + 1;
  for (const std::string& c : candidates) {
    const std::size_t d = edit_distance(word, c);
    if (d < best_distance) {
      best_distance = d;
      best = c;
    }
  }
  // One edit is surely a typo; two may be ("sharding_stratgy"), unless the word names a
  // candidate by its words ("mfu" is measured_mfu, not gpu).
  if ((!best.empty() && best_distance <= 1) || word.empty()) return best;
  // A shortened name ("sharding" for sharding_strategy, "H100" for h100-sxm-80gb, "A100 80GB" for
  // a100-sxm-80gb): the one candidate that has each of the word's words, whatever their case, as
  // a whole word of its own (words separated by '_', '-', '.' or spaces: "llama-3-8b" for
  // llama-3.1-8b).
  const auto words_of = [](const std::string& text) {
    std::vector<std::string> out(1);
    for (const char ch : text) {
      if (ch == '_' || ch == '-' || ch == ' ' || ch == '.') {
        if (!out.back().empty()) out.emplace_back();
      } else {
        out.back() += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      }
    }
    if (out.back().empty()) out.pop_back();
    return out;
  };
  const std::vector<std::string> wanted = words_of(word);
  std::string named;
  for (const std::string& c : candidates) {
    const std::vector<std::string> own = words_of(c);
    const bool has_all =
        !wanted.empty() && std::all_of(wanted.begin(), wanted.end(), [&](const std::string& w) {
          return std::find(own.begin(), own.end(), w) != own.end();
        });
    if (!has_all) continue;
    if (!named.empty()) return best;  // ambiguous: the typo, if any
    named = c;
  }
  return named.empty() ? best : named;
}

std::string describe_json_type(const nlohmann::json& value) {
  switch (value.type()) {
    case nlohmann::json::value_t::null:
      return "null";
    case nlohmann::json::value_t::object:
      return value.empty() ? "an empty object" : "an object";
    case nlohmann::json::value_t::array:
      return value.empty() ? "an empty array" : "an array";
    case nlohmann::json::value_t::string: {
      // A long value is shown by its start and length, not echoed whole.
      const std::string& text = value.get_ref<const std::string&>();
      constexpr std::size_t kShown = 80;
      if (text.size() <= kShown) return fmt::format("the string \"{}\"", text);
      return fmt::format("a string of {} characters starting \"{}...\"", text.size(),
                         text.substr(0, kShown));
    }
    case nlohmann::json::value_t::boolean:
      return value.get<bool>() ? "true" : "false";
    case nlohmann::json::value_t::number_integer:
    case nlohmann::json::value_t::number_unsigned:
    case nlohmann::json::value_t::number_float:
      return fmt::format("the number {}", value.dump());
    default:
      return "an unsupported value";
  }
}

JsonObjectReader::JsonObjectReader(const nlohmann::json& object, std::string file, std::string path)
    : object_(object), file_(std::move(file)), path_(std::move(path)) {
  if (!object_.is_object()) {
    throw ConfigError(file_, path_.empty() ? "/" : path_,
                      fmt::format("expected an object, found {}", describe_json_type(object_)));
  }
}

bool JsonObjectReader::has(const std::string& key) const {
  asked_.insert(key);
  return object_.contains(key);
}

void JsonObjectReader::fail(const std::string& key, const std::string& message) const {
  throw ConfigError(file_, path_of(key), message);
}

const nlohmann::json& JsonObjectReader::require(const std::string& key) {
  read_.insert(key);
  const auto it = object_.find(key);
  if (it == object_.end()) {
    // A key of the object that is a typo of the one required says more than its absence.
    constexpr std::size_t kLongestKeyCompared = 80;  // as finish(): no key of ours is longer
    for (const auto& [other, value] : object_.items()) {
      if (other.size() <= kLongestKeyCompared && !did_you_mean(other, {key}).empty()) {
        fail(key,
             fmt::format("required key is missing; found \"{}\": did you mean {}?", other, key));
      }
    }
    fail(key, "required key is missing");
  }
  return *it;
}

std::optional<std::int64_t> whole_number(const nlohmann::json& v) {
  if (v.is_number_unsigned()) {
    const auto u = v.get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
      return std::nullopt;
    return static_cast<std::int64_t>(u);
  }
  if (v.is_number_integer()) return v.get<std::int64_t>();
  if (!v.is_number_float()) return std::nullopt;
  const double d = v.get<double>();
  // 2^63 is the first double beyond int64; below it every whole double converts exactly.
  if (!std::isfinite(d) || d != std::floor(d) || std::fabs(d) >= 9223372036854775808.0)
    return std::nullopt;
  return static_cast<std::int64_t>(d);
}

namespace {

// Whether `v` is a whole number past what 64 bits hold: messages then give the bound, rather
// than refuse 9.3e18 as if it were not an integer at all.
bool past_64_bits(const nlohmann::json& v) {
  constexpr double kInt64Limit = 9223372036854775808.0;  // 2^63
  return (v.is_number_unsigned() &&
          v.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX)) ||
         (v.is_number_float() && std::isfinite(v.get<double>()) &&
          std::fabs(v.get<double>()) >= kInt64Limit);
}

std::string at_most_int64(const nlohmann::json& v) {
  return past_64_bits(v) ? " of at most 2^63 - 1" : "";
}

}  // namespace

std::int64_t JsonObjectReader::positive_int(const std::string& key) {
  const nlohmann::json& v = require(key);
  const std::optional<std::int64_t> n = whole_number(v);
  if (!n || *n <= 0) {
    fail(key, fmt::format("expected a positive integer{}, found {}", at_most_int64(v),
                          describe_json_type(v)));
  }
  return *n;
}

void JsonObjectReader::schema_version(std::int64_t supported, bool required) {
  const std::string key = "schema_version";
  if (!required && !has(key)) {
    read_.insert(key);
    return;
  }
  if (positive_int(key) != supported) {
    fail(key, fmt::format("this fsdpsim reads schema_version {}", supported));
  }
}

std::int64_t JsonObjectReader::positive_int(const std::string& key, std::int64_t fallback) {
  return has(key) ? positive_int(key) : (read_.insert(key), fallback);
}

std::int64_t JsonObjectReader::non_negative_int(const std::string& key) {
  const nlohmann::json& v = require(key);
  const std::optional<std::int64_t> n = whole_number(v);
  if (!n || *n < 0) {
    fail(key, fmt::format("expected a non-negative integer{}, found {}", at_most_int64(v),
                          describe_json_type(v)));
  }
  return *n;
}

std::int32_t JsonObjectReader::positive_int32(const std::string& key) {
  return static_cast<std::int32_t>(
      positive_int_at_most(key, std::numeric_limits<std::int32_t>::max()));
}

std::int32_t JsonObjectReader::positive_int32(const std::string& key, std::int32_t fallback) {
  return static_cast<std::int32_t>(
      positive_int_at_most(key, std::numeric_limits<std::int32_t>::max(), fallback));
}

std::int32_t JsonObjectReader::non_negative_int32(const std::string& key) {
  if (past_64_bits(require(key))) {
    fail(key, fmt::format("expected a non-negative integer of at most 2147483647, found {}",
                          describe_json_type(require(key))));
  }
  const std::int64_t v = non_negative_int(key);
  if (v > std::numeric_limits<std::int32_t>::max())
    fail(key, fmt::format("expected a non-negative integer of at most 2147483647, found {}", v));
  return static_cast<std::int32_t>(v);
}

std::int64_t JsonObjectReader::positive_int_at_most(const std::string& key, std::int64_t max) {
  if (past_64_bits(require(key))) {
    fail(key, fmt::format("expected a positive integer of at most {}, found {}", max,
                          describe_json_type(require(key))));
  }
  const std::int64_t v = positive_int(key);
  if (v > max)
    fail(key, fmt::format("expected a positive integer of at most {}, found {}", max, v));
  return v;
}

std::int64_t JsonObjectReader::positive_int_at_most(const std::string& key, std::int64_t max,
                                                    std::int64_t fallback) {
  return has(key) ? positive_int_at_most(key, max) : (read_.insert(key), fallback);
}

double JsonObjectReader::positive_number(const std::string& key) {
  const nlohmann::json& v = require(key);
  if (!v.is_number() || !(v.get<double>() > 0.0) || !std::isfinite(v.get<double>())) {
    fail(key, fmt::format("expected a positive number, found {}", describe_json_type(v)));
  }
  return v.get<double>();
}

double JsonObjectReader::non_negative_number(const std::string& key) {
  const nlohmann::json& v = require(key);
  if (!v.is_number() || !(v.get<double>() >= 0.0) || !std::isfinite(v.get<double>())) {
    fail(key, fmt::format("expected a non-negative number, found {}", describe_json_type(v)));
  }
  return v.get<double>();
}

double JsonObjectReader::positive_number_at_most(const std::string& key, double max) {
  const double v = positive_number(key);
  if (v > max) fail(key, fmt::format("expected a positive number of at most {}, found {}", max, v));
  return v;
}

double JsonObjectReader::non_negative_number_at_most(const std::string& key, double max) {
  const nlohmann::json& v = require(key);
  // The whole range in one message, whichever end is passed.
  if (!v.is_number() || !(v.get<double>() >= 0.0) || !(v.get<double>() <= max)) {
    fail(key, fmt::format("expected a non-negative number of at most {}, found {}", max,
                          describe_json_type(v)));
  }
  return v.get<double>();
}

double JsonObjectReader::fraction(const std::string& key) {
  const nlohmann::json& v = require(key);
  if (!v.is_number() || !(v.get<double>() > 0.0 && v.get<double>() <= 1.0)) {
    fail(key, fmt::format("expected a number in (0, 1], found {}", describe_json_type(v)));
  }
  return v.get<double>();
}

bool JsonObjectReader::boolean(const std::string& key) {
  (void)require(key);  // throws: required key is missing
  return *optional_boolean(key);
}

bool JsonObjectReader::boolean(const std::string& key, bool fallback) {
  return optional_boolean(key).value_or(fallback);
}

std::optional<bool> JsonObjectReader::optional_boolean(const std::string& key) {
  read_.insert(key);
  if (!has(key)) return std::nullopt;
  const nlohmann::json& v = object_.at(key);
  if (!v.is_boolean())
    fail(key, fmt::format("expected true or false, found {}", describe_json_type(v)));
  return v.get<bool>();
}

std::string JsonObjectReader::string(const std::string& key) {
  const nlohmann::json& v = require(key);
  if (!v.is_string()) fail(key, fmt::format("expected a string, found {}", describe_json_type(v)));
  return v.get<std::string>();
}

std::string JsonObjectReader::string(const std::string& key, const std::string& fallback) {
  return has(key) ? string(key) : (read_.insert(key), fallback);
}

std::string JsonObjectReader::name(const std::string& key) {
  std::string value = string(key);
  if (value.empty()) fail(key, "expected a name, found an empty string");
  if (const auto c = find_control_character(value, "")) {
    fail(key, fmt::format("expected a name on one line, without control characters; found {} "
                          "at byte {}",
                          c->name, c->offset));
  }
  return value;
}

std::string JsonObjectReader::name(const std::string& key, const std::string& fallback) {
  return has(key) ? name(key) : (read_.insert(key), fallback);
}

std::string JsonObjectReader::choice(const std::string& key,
                                     const std::vector<std::string>& choices) {
  (void)require(key);  // throws: required key is missing
  return choice(key, choices, "");
}

std::string JsonObjectReader::choice(const std::string& key,
                                     const std::vector<std::string>& choices,
                                     const std::string& fallback) {
  const std::string value = string(key, fallback);
  if (std::find(choices.begin(), choices.end(), value) != choices.end()) return value;
  const std::string hint = did_you_mean(value, choices);
  constexpr std::size_t kShown = 80;  // a long value is shown by its start and length
  const std::string shown =
      value.size() <= kShown
          ? fmt::format("\"{}\"", value)
          : fmt::format("\"{}...\" ({} characters)", value.substr(0, kShown), value.size());
  fail(key, fmt::format("expected one of {}, found {}{}", fmt::join(choices, ", "), shown,
                        hint.empty() ? "" : fmt::format("; did you mean {}?", hint)));
}

const nlohmann::json* JsonObjectReader::child(const std::string& key) {
  read_.insert(key);
  const auto it = object_.find(key);
  return it == object_.end() ? nullptr : &*it;
}

void JsonObjectReader::ignore(const std::string& key) {
  read_.insert(key);
  ignored_.insert(key);
}

void JsonObjectReader::finish(const std::vector<std::string>& also_known) const {
  std::vector<std::string> known(read_.begin(), read_.end());
  known.insert(known.end(), asked_.begin(), asked_.end());
  known.insert(known.end(), also_known.begin(), also_known.end());
  for (const auto& [key, value] : object_.items()) {
    if (std::find(known.begin(), known.end(), key) != known.end()) continue;
    // Every key fsdpsim reads is a few words: a longer one is no typo of one (and comparing it
    // with each known key, and printing it whole, cost seconds and megabytes for a huge one).
    constexpr std::size_t kLongestKeyShown = 80;
    if (key.size() > kLongestKeyShown) {
      throw ConfigError(file_, path_of(key.substr(0, kLongestKeyShown)) + "...",
                        fmt::format("unknown key ({} bytes long)", key.size()));
    }
    std::string hint = did_you_mean(key, known);
    if (hint.empty()) hint = key_of_one_child(object_, key, ignored_);
    if (!hint.empty()) {
      throw ConfigError(file_, path_of(key), fmt::format("unknown key; did you mean {}?", hint));
    }
    // Nothing close: the keys this object takes, so that no one has to open a preset to find
    // that the memory is `hbm_bytes` (documentation keys, ignored, left out).
    std::erase_if(known, [this](const std::string& k) { return ignored_.count(k) > 0; });
    std::sort(known.begin(), known.end());
    known.erase(std::unique(known.begin(), known.end()), known.end());
    constexpr std::size_t kKeysListedAtMost = 40;
    throw ConfigError(
        file_, path_of(key),
        known.empty() || known.size() > kKeysListedAtMost
            ? std::string("unknown key")
            : fmt::format("unknown key; the keys here are {}", fmt::join(known, ", ")));
  }
}

}  // namespace fsdpsim::app
