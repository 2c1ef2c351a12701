#include "sim/app/json_text_writer.hpp"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <array>
#include <cmath>
#include <stdexcept>
#include <utility>

namespace fsdpsim::app {
namespace {

// dump()'s escaping leaves printable ASCII other than '"' and '\' as it is (serializer.hpp,
// dump_escaped with ensure_ascii false); anything else takes dump() itself, so control
// characters, UTF-8 and its errors come out exactly as there.
bool needs_escaping(std::string_view s) {
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u >= 0x80 || c == '"' || c == '\\') return true;
  }
  return false;
}

}  // namespace

void JsonTextWriter::before_value() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (depth_ > 0 && std::exchange(has_member_[depth_ - 1], true)) out_ += ',';
}

JsonTextWriter& JsonTextWriter::open(char bracket) {
  before_value();
  if (depth_ == kMaxDepth) throw std::logic_error("JsonTextWriter: nested too deep");
  has_member_[depth_++] = false;
  out_ += bracket;
  return *this;
}

JsonTextWriter& JsonTextWriter::close(char bracket) {
  if (depth_ == 0 || after_key_) throw std::logic_error("JsonTextWriter: unbalanced close");
  --depth_;
  out_ += bracket;
  return *this;
}

JsonTextWriter& JsonTextWriter::key(std::string_view k) {
  if (depth_ == 0 || after_key_) throw std::logic_error("JsonTextWriter: key outside an object");
  before_value();
  write_string(k);
  out_ += ':';
  after_key_ = true;
  return *this;
}

void JsonTextWriter::write_string(std::string_view s) {
  if (needs_escaping(s)) {
    out_ += nlohmann::json(std::string(s)).dump();
  } else {
    out_ += '"';
    out_ += s;
    out_ += '"';
  }
}

JsonTextWriter& JsonTextWriter::value(std::string_view s) {
  before_value();
  write_string(s);
  return *this;
}

JsonTextWriter& JsonTextWriter::value(std::int64_t n) {
  before_value();
  const fmt::format_int text(n);
  out_.append(text.data(), text.size());
  return *this;
}

JsonTextWriter& JsonTextWriter::value(double x) {
  before_value();
  if (!std::isfinite(x)) {
    out_ += "null";  // as dump() writes NaN and infinities
    return *this;
  }
  // dump()'s own float formatting (Grisu2, serializer.hpp dump_float), so that the digits match.
  std::array<char, 64> buffer{};
  char* end = nlohmann::detail::to_chars(buffer.data(), buffer.data() + buffer.size(), x);
  out_.append(buffer.data(), static_cast<std::size_t>(end - buffer.data()));
  return *this;
}

}  // namespace fsdpsim::app
