// JSON written straight into a string, value by value, for outputs with millions of small objects
// (the trace's events): building each as an nlohmann::json tree and dumping it spent most of the
// trace's time allocating and freeing the tree. The text is byte for byte what nlohmann's dump()
// writes for the same values, provided the caller gives each object's keys in the order dump()
// sorts them (std::map<std::string>: byte-wise) — tests/unit/app/json_text_writer_test.cpp
// checks both.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace fsdpsim::app {

class JsonTextWriter {
 public:
  explicit JsonTextWriter(std::string& out) : out_(out) {}

  JsonTextWriter& begin_object() { return open('{'); }
  JsonTextWriter& end_object() { return close('}'); }
  JsonTextWriter& begin_array() { return open('['); }
  JsonTextWriter& end_array() { return close(']'); }
  // The next value's key, inside an object.
  JsonTextWriter& key(std::string_view k);

  JsonTextWriter& value(std::string_view s);
  JsonTextWriter& value(const char* s) { return value(std::string_view(s)); }
  JsonTextWriter& value(std::int64_t n);
  JsonTextWriter& value(int n) { return value(static_cast<std::int64_t>(n)); }
  JsonTextWriter& value(double x);

  // key(k).value(v)
  template <typename T>
  JsonTextWriter& field(std::string_view k, const T& v) {
    return key(k).value(v);
  }

 private:
  void before_value();
  void write_string(std::string_view s);
  JsonTextWriter& open(char bracket);
  JsonTextWriter& close(char bracket);

  static constexpr std::size_t kMaxDepth = 16;
  std::string& out_;
  std::array<bool, kMaxDepth> has_member_{};  // per open container: a member was written
  std::size_t depth_ = 0;
  bool after_key_ = false;
};

}  // namespace fsdpsim::app
