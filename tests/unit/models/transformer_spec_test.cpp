#include "models/transformer_spec.hpp"

#include <gtest/gtest.h>

#include "test_specs.hpp"

namespace fsdpsim::models {
namespace {

using testing::make_spec;

TEST(Validate, AcceptsConsistentSpecsOfEveryFamily) {
  EXPECT_EQ(validate(testing::tiny_gpt()), "");
  EXPECT_EQ(validate(testing::mpt_spec(80, 8192, 64, 50368, 2048)), "");
  EXPECT_EQ(validate(testing::llama_3_1_8b()), "");
}

TEST(Validate, NamesHeadsThatDoNotDivideDModel) {
  const TransformerSpec spec = make_spec(ModelFamily::kGpt, 96, 12290, 96, 96, 49152, 50000, 2048);
  EXPECT_EQ(validate(spec), "n_heads (96) must divide d_model (12290)");
}

TEST(Validate, NamesKvHeadsThatDoNotDivideHeads) {
  const TransformerSpec spec = make_spec(ModelFamily::kLlama, 32, 4096, 32, 3, 14336, 128256, 8192);
  EXPECT_EQ(validate(spec), "n_kv_heads (3) must divide n_heads (32)");
}

TEST(Validate, NamesTheFirstNonPositiveField) {
  TransformerSpec spec = testing::tiny_gpt();
  spec.n_layers = 0;
  EXPECT_EQ(validate(spec), "n_layers must be positive (got 0)");
  spec = testing::tiny_gpt();
  spec.vocab = -5;
  EXPECT_EQ(validate(spec), "vocab must be positive (got -5)");
  spec = testing::tiny_gpt();
  spec.ffn_dim = 0;
  EXPECT_EQ(validate(spec), "ffn_dim must be positive (got 0)");
  spec = testing::tiny_gpt();
  spec.n_kv_heads = 0;
  EXPECT_EQ(validate(spec), "n_kv_heads must be positive (got 0)");
}

TEST(Validate, RequiresAPositionTableForLearnedPositionFamilies) {
  TransformerSpec gpt = testing::tiny_gpt();
  gpt.max_seq_len = 0;
  EXPECT_NE(validate(gpt).find("max_seq_len must be positive (got 0)"), std::string::npos);
  TransformerSpec mpt = testing::mpt_spec(2, 64, 4, 100, 0);
  EXPECT_NE(validate(mpt).find("max_seq_len"), std::string::npos);
  // llama uses RoPE: the context length is informational.
  TransformerSpec llama = testing::llama_3_1_8b();
  llama.max_seq_len = 0;
  EXPECT_EQ(validate(llama), "");
  llama.max_seq_len = -1;
  EXPECT_EQ(validate(llama), "max_seq_len must not be negative (got -1)");
}

}  // namespace
}  // namespace fsdpsim::models
