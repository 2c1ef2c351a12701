// A tiny JSON writer, so that the harness needs nothing but the CUDA toolkit and NCCL (the GPU
// machines it runs on have no JSON library). Readable output: one key per line in objects, each
// object of an array on its own line, "compact" objects (measurement points) on one line.
// RFC 8259 string escaping; numbers with 10 significant digits; non-finite numbers as null.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

namespace fsdpsim::harness {

class JsonWriter {
 public:
  JsonWriter& begin_object(bool compact = false) { return open('{', compact); }
  JsonWriter& end_object() { return close('}'); }
  JsonWriter& begin_array() { return open('[', false); }
  JsonWriter& end_array() { return close(']'); }

  JsonWriter& key(std::string_view k) {
    separator();
    if (!levels_.back().compact) newline();
    string_literal(k);
    out_ += ": ";
    after_key_ = true;
    return *this;
  }
  JsonWriter& value(std::string_view s) {
    separator();
    string_literal(s);
    return *this;
  }
  JsonWriter& value(const char* s) { return value(std::string_view(s)); }
  JsonWriter& value(const std::string& s) { return value(std::string_view(s)); }
  JsonWriter& value(bool b) {
    separator();
    out_ += b ? "true" : "false";
    return *this;
  }
  JsonWriter& value(std::int64_t v) {
    separator();
    out_ += std::to_string(v);
    return *this;
  }
  JsonWriter& value(std::int32_t v) { return value(static_cast<std::int64_t>(v)); }
  JsonWriter& value(double v) {
    separator();
    if (!std::isfinite(v)) {
      out_ += "null";
      return *this;
    }
    char buffer[32];
    std::snprintf(buffer, sizeof buffer, "%.10g", v);
    out_ += buffer;
    return *this;
  }
  JsonWriter& null() {
    separator();
    out_ += "null";
    return *this;
  }

  template <typename T>
  JsonWriter& field(std::string_view k, const T& v) {
    key(k);
    return value(v);
  }

  [[nodiscard]] const std::string& str() const { return out_; }

 private:
  struct Level {
    char kind = '{';
    bool empty = true;
    bool compact = false;
    bool object_items = false;  // an array holding objects: each on its own line
  };

  JsonWriter& open(char c, bool compact) {
    const bool in_array = !levels_.empty() && levels_.back().kind == '[' && !after_key_;
    separator();
    const bool parent_compact = !levels_.empty() && levels_.back().compact;
    if (in_array && c == '{' && !parent_compact) {
      if (!out_.empty() && out_.back() == ' ') out_.pop_back();
      levels_.back().object_items = true;
      newline();
    }
    out_ += c;
    levels_.push_back(Level{c, true, compact || parent_compact});
    return *this;
  }
  JsonWriter& close(char c) {
    const Level level = levels_.back();
    levels_.pop_back();
    if (!level.empty && !level.compact && (level.kind == '{' || level.object_items)) newline();
    out_ += c;
    return *this;
  }
  // Before a value or key: a comma unless first in its container (a key's value never gets one).
  void separator() {
    if (after_key_) {
      after_key_ = false;
      return;
    }
    if (levels_.empty()) return;
    Level& level = levels_.back();
    if (!level.empty) out_ += (level.kind == '[' || level.compact) ? ", " : ",";
    level.empty = false;
  }
  void newline() {
    out_ += '\n';
    out_.append(2 * levels_.size(), ' ');
  }
  void string_literal(std::string_view s) {
    out_ += '"';
    for (const char c : s) {
      switch (c) {
        case '"':
          out_ += "\\\"";
          break;
        case '\\':
          out_ += "\\\\";
          break;
        case '\n':
          out_ += "\\n";
          break;
        case '\r':
          out_ += "\\r";
          break;
        case '\t':
          out_ += "\\t";
          break;
        default:
          if (static_cast<unsigned char>(c) < 0x20) {
            char buffer[8];
            std::snprintf(buffer, sizeof buffer, "\\u%04x",
                          static_cast<unsigned>(static_cast<unsigned char>(c)));
            out_ += buffer;
          } else {
            out_ += c;
          }
      }
    }
    out_ += '"';
  }

  std::string out_;
  std::vector<Level> levels_;
  bool after_key_ = false;
};

}  // namespace fsdpsim::harness
