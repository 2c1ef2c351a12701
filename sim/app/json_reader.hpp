// Strict, typed reading of one JSON object: every key read is marked, finish() rejects the
// rest with a did-you-mean, and every error names the file and the JSON path (RFC 6901 style).
// JSON stays at the edge: these helpers are used only by the *_json.cpp converters of sim/app.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace fsdpsim::app {

// The candidate that is `word` but for case, spaces or hyphens ("H100-SXM-80GB" for
// h100-sxm-80gb, "Memory Fraction" for memory_fraction), or "" when none is.
std::string same_name_but_for_case(const std::string& word,
                                   const std::vector<std::string>& candidates);

// Edit distance counting an insertion, a deletion, a substitution or a swap of two adjacent
// characters as one edit (optimal string alignment).
std::size_t edit_distance(const std::string& a, const std::string& b);

// What `word` most likely meant among `candidates`, tried in this order: the same name but for
// case, spaces or hyphens; a candidate one edit away; the one candidate that has each of
// `word`'s words, in any case, as a whole word ('_', '-', '.' or space separated: "sharding" ->
// "sharding_strategy", "A100 80GB" -> "a100-sxm-80gb", "mfu" -> "measured_mfu"); the closest
// plausible typo (two edits or more); else empty.
std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates);

// The JSON type of a value in words ("a string", "an integer", ...), for messages.
std::string describe_json_type(const nlohmann::json& value);

// One key as a JSON pointer reference token (RFC 6901, Sec. 3): '~' written "~0" and '/'
// written "~1", so a key holding either names one place in a path.
std::string pointer_token(const std::string& key);

// "a.b.c" as its keys {"a", "b", "c"}; an empty key between two dots (or at an end) is kept,
// for the caller to refuse.
std::vector<std::string> split_dotted_key(const std::string& key);

// An integer as JSON writes it, 8 or 8.0 or 1e9 (DeepSpeed configs write sizes as 5e8): the
// number when it is whole and fits 64 bits, else nothing.
std::optional<std::int64_t> whole_number(const nlohmann::json& v);

class JsonObjectReader {
 public:
  // Throws ConfigError if `object` is not a JSON object.
  JsonObjectReader(const nlohmann::json& object, std::string file, std::string path);

  [[nodiscard]] bool has(const std::string& key) const;
  [[nodiscard]] std::string path_of(const std::string& key) const {
    return path_ + "/" + pointer_token(key);
  }
  [[nodiscard]] const std::string& file() const { return file_; }

  std::int64_t positive_int(const std::string& key);
  std::int64_t positive_int(const std::string& key, std::int64_t fallback);
  std::int64_t non_negative_int(const std::string& key);
  // The same, for settings held in 32 bits (counts, versions): larger values are errors, not
  // silently wrapped.
  std::int32_t positive_int32(const std::string& key);
  std::int32_t positive_int32(const std::string& key, std::int32_t fallback);
  std::int32_t non_negative_int32(const std::string& key);
  // A positive integer no larger than `max`: sizes whose products must stay within 64 bits.
  std::int64_t positive_int_at_most(const std::string& key, std::int64_t max);
  std::int64_t positive_int_at_most(const std::string& key, std::int64_t max,
                                    std::int64_t fallback);
  double positive_number(const std::string& key);
  double non_negative_number(const std::string& key);
  // The same, no larger than `max`: amounts a model turns into 64-bit byte counts.
  double positive_number_at_most(const std::string& key, double max);
  double non_negative_number_at_most(const std::string& key, double max);
  double fraction(const std::string& key);  // in (0, 1]
  bool boolean(const std::string& key);     // required
  bool boolean(const std::string& key, bool fallback);
  std::optional<bool> optional_boolean(const std::string& key);
  std::string string(const std::string& key);
  std::string string(const std::string& key, const std::string& fallback);
  // A name printed in tables, summaries and traces: a string of one line, without control
  // characters (a newline in a layer's name would break explain's table).
  std::string name(const std::string& key);
  std::string name(const std::string& key, const std::string& fallback);
  // One of `choices` (exact spelling); the error lists them. Without a fallback the key is
  // required.
  std::string choice(const std::string& key, const std::vector<std::string>& choices);
  std::string choice(const std::string& key, const std::vector<std::string>& choices,
                     const std::string& fallback);
  // The raw value, marked as read; nullptr if absent.
  const nlohmann::json* child(const std::string& key);
  // The raw value of a required key, marked as read; throws ConfigError when it is absent (naming
  // a key of the object that looks like a typo of it).
  const nlohmann::json& require(const std::string& key);
  // Marks keys as known without reading them (documentation fields).
  void ignore(const std::string& key);
  // "schema_version", which must be the integer `supported` when present; a scenario requires
  // it, a preset or an inline model or hardware description may leave it out.
  void schema_version(std::int64_t supported, bool required);

  // Rejects keys that were not read: "unknown key /fsdp/sharding_stratgy; did you mean
  // sharding_strategy?".
  void finish(const std::vector<std::string>& also_known = {}) const;

 private:
  [[noreturn]] void fail(const std::string& key, const std::string& message) const;

  const nlohmann::json& object_;
  std::string file_;
  std::string path_;
  std::set<std::string> read_;
  std::set<std::string> ignored_;  // documentation, not configuration
  // Keys has() asked about, present or not: keys of this object too, for finish()'s
  // did-you-mean and list (an optional key read only when present is asked about this way).
  mutable std::set<std::string> asked_;
};

}  // namespace fsdpsim::app
