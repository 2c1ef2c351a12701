#include "sim/engine/name_table.hpp"

#include <gtest/gtest.h>

#include <string>

namespace fsdpsim::engine {
namespace {

TEST(NameTable, ReadsBackEachNameByTheIndexItWasGiven) {
  NameTable names;
  EXPECT_TRUE(names.empty());
  EXPECT_EQ(names.intern("blocks.0.fwd.attn"), 0U);
  EXPECT_EQ(names.intern(""), 1U);
  EXPECT_EQ(names.intern("x"), 2U);
  ASSERT_EQ(names.size(), 3U);
  EXPECT_EQ(names[0], "blocks.0.fwd.attn");
  EXPECT_EQ(names[1], "");
  EXPECT_EQ(names[2], "x");
}

// Every micro-batch issues the same names: each is stored once and keeps its first index.
TEST(NameTable, ANameAddedAgainGetsItsFirstIndex) {
  NameTable names;
  EXPECT_EQ(names.intern("blocks.0.fwd.attn"), 0U);
  EXPECT_EQ(names.intern("blocks.0.fwd.mlp"), 1U);
  EXPECT_EQ(names.intern("blocks.0.fwd.attn"), 0U);
  EXPECT_EQ(names.intern(""), 2U);
  EXPECT_EQ(names.intern(""), 2U);
  EXPECT_EQ(names.intern("blocks.0.fwd.att"), 3U);  // a prefix is another name
  EXPECT_EQ(names.size(), 4U);
}

TEST(NameTable, KeepsNamesIntactWhileItsBufferAndIndexGrow) {
  NameTable names;
  std::string long_name(100, 'a');
  for (int i = 0; i < 1000; ++i) names.intern(long_name + std::to_string(i));
  for (int i = 0; i < 1000; ++i) {
    ASSERT_EQ(names.intern(long_name + std::to_string(i)), static_cast<std::uint32_t>(i));
  }
  EXPECT_EQ(names.size(), 1000U);
  EXPECT_EQ(names[0], long_name + "0");
  EXPECT_EQ(names[517], long_name + "517");
  EXPECT_EQ(names[999], long_name + "999");
}

TEST(NameTable, BuildsFromAList) {
  const NameTable names = {"first", "second", "first"};
  ASSERT_EQ(names.size(), 2U);
  EXPECT_EQ(names[0], "first");
  EXPECT_EQ(names[1], "second");
}

}  // namespace
}  // namespace fsdpsim::engine
