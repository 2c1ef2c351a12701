// JsonTextWriter writes the text nlohmann's dump() writes for the same values: the trace relies
// on it to stay byte-identical to what it was when its events were nlohmann objects.
#include "sim/app/json_text_writer.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

namespace fsdpsim::app {
namespace {

std::string written_double(double x) {
  std::string out;
  JsonTextWriter(out).value(x);
  return out;
}

std::string written_string(const std::string& s) {
  std::string out;
  JsonTextWriter(out).value(s);
  return out;
}

TEST(JsonTextWriter, DoublesAreWrittenAsDumpWritesThem) {
  const std::vector<double> values = {0.0,
                                      -0.0,
                                      1.0,
                                      -1.5,
                                      0.1,
                                      1.0 / 3.0,
                                      100.0,
                                      123456789012345.0,
                                      1234567890123456789.0,
                                      1e-4,
                                      1e-5,
                                      2.5e-7,
                                      6.02214076e23,
                                      std::numeric_limits<double>::min(),
                                      std::numeric_limits<double>::max(),
                                      std::numeric_limits<double>::denorm_min(),
                                      std::numeric_limits<double>::quiet_NaN(),
                                      std::numeric_limits<double>::infinity(),
                                      -std::numeric_limits<double>::infinity()};
  for (const double x : values) EXPECT_EQ(written_double(x), nlohmann::json(x).dump()) << x;
}

TEST(JsonTextWriter, IntegersAreWrittenAsDumpWritesThem) {
  for (const std::int64_t n :
       {std::int64_t{0}, std::int64_t{-1}, std::int64_t{42},
        std::numeric_limits<std::int64_t>::min(), std::numeric_limits<std::int64_t>::max()}) {
    std::string out;
    JsonTextWriter(out).value(n);
    EXPECT_EQ(out, nlohmann::json(n).dump()) << n;
  }
}

TEST(JsonTextWriter, StringsAreEscapedAsDumpEscapesThem) {
  const std::vector<std::string> values = {"",
                                           "blocks.3 forward all-gather",
                                           "quote \" and backslash \\",
                                           "tab\tnewline\ncarriage\rbell\x07",
                                           std::string("nul\0byte", 8),
                                           "delete \x7f",
                                           "unit \xc3\xa9t\xc3\xa9 \xe2\x86\x92 \xf0\x9f\x9a\x80"};
  for (const std::string& s : values) EXPECT_EQ(written_string(s), nlohmann::json(s).dump()) << s;
}

TEST(JsonTextWriter, InvalidUtf8IsRefusedAsDumpRefusesIt) {
  EXPECT_THROW(nlohmann::json(std::string("bad \xff")).dump(), nlohmann::json::type_error);
  EXPECT_THROW(written_string("bad \xff"), nlohmann::json::type_error);
}

TEST(JsonTextWriter, NestedObjectsAndArraysMatchDumpWithKeysInItsOrder) {
  const nlohmann::json expected = {
      {"args", {{"issued_us", 1.25}, {"phase", "forward"}}},
      {"cat", "compute"},
      {"empty", nlohmann::json::object()},
      {"list", {1, 2.5, "three", nlohmann::json::array(), {{"k", -4}}}},
      {"ph", "X"},
  };
  std::string out;
  JsonTextWriter w(out);
  w.begin_object();
  w.key("args").begin_object().field("issued_us", 1.25).field("phase", "forward").end_object();
  w.field("cat", "compute");
  w.key("empty").begin_object().end_object();
  w.key("list").begin_array().value(1).value(2.5).value("three");
  w.begin_array().end_array();
  w.begin_object().field("k", -4).end_object();
  w.end_array();
  w.field("ph", "X");
  w.end_object();
  EXPECT_EQ(out, expected.dump());
}

TEST(JsonTextWriter, MisuseIsAProgrammingError) {
  std::string out;
  EXPECT_THROW(JsonTextWriter(out).end_object(), std::logic_error);
  EXPECT_THROW(JsonTextWriter(out).key("outside"), std::logic_error);
  JsonTextWriter dangling(out);
  dangling.begin_object().key("k");
  EXPECT_THROW(dangling.end_object(), std::logic_error);
  EXPECT_THROW(dangling.key("twice"), std::logic_error);
  JsonTextWriter deep(out);
  for (int i = 0; i < 16; ++i) deep.begin_array();
  EXPECT_THROW(deep.begin_array(), std::logic_error);
}

}  // namespace
}  // namespace fsdpsim::app
