#include "sim/engine/name_table.hpp"

#include <gtest/gtest.h>

#include <string>

namespace fsdpsim::engine {
namespace {

TEST(NameTable, ReadsBackEachNameByTheIndexItWasGiven) {
  NameTable names;
  EXPECT_TRUE(names.empty());
  EXPECT_EQ(names.push_back("blocks.0.fwd.attn"), 0U);
  EXPECT_EQ(names.push_back(""), 1U);
  EXPECT_EQ(names.push_back("x"), 2U);
  ASSERT_EQ(names.size(), 3U);
  EXPECT_EQ(names[0], "blocks.0.fwd.attn");
  EXPECT_EQ(names[1], "");
  EXPECT_EQ(names[2], "x");
}

TEST(NameTable, KeepsNamesIntactWhileItsBufferGrows) {
  NameTable names;
  std::string long_name(100, 'a');
  for (int i = 0; i < 1000; ++i) names.push_back(long_name + std::to_string(i));
  EXPECT_EQ(names[0], long_name + "0");
  EXPECT_EQ(names[517], long_name + "517");
  EXPECT_EQ(names[999], long_name + "999");
}

TEST(NameTable, BuildsFromAList) {
  const NameTable names = {"first", "second"};
  ASSERT_EQ(names.size(), 2U);
  EXPECT_EQ(names[0], "first");
  EXPECT_EQ(names[1], "second");
}

}  // namespace
}  // namespace fsdpsim::engine
