#include "hardware/gpu_spec.hpp"

#include <cmath>
#include <limits>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "preset_loader.hpp"

namespace fsdpsim::hardware {
namespace {

using ::testing::HasSubstr;

ClusterSpec a100() { return testing::load_preset("a100-sxm-80gb", 2); }

TEST(ValidateClusterSpec, ConsistentSpecHasNoMessage) { EXPECT_EQ(validate(a100()), ""); }

TEST(ValidateClusterSpec, NamesNonPositiveCounts) {
  ClusterSpec spec = a100();
  spec.nodes = 0;
  spec.gpus_per_node = -8;
  spec.gpu.sm_count = 0;
  const std::string message = validate(spec);
  EXPECT_THAT(message, HasSubstr("nodes = 0 (must be > 0)"));
  EXPECT_THAT(message, HasSubstr("gpus_per_node = -8 (must be > 0)"));
  EXPECT_THAT(message, HasSubstr("gpu.sm_count = 0 (must be > 0)"));
}

TEST(ValidateClusterSpec, NamesNonPositiveBandwidthsWithUnits) {
  ClusterSpec spec = a100();
  spec.nvlink_bandwidth = BytesPerSec(0.0);
  spec.nic_bandwidth_per_node = BytesPerSec(-1.0);
  spec.gpu.hbm_bandwidth = BytesPerSec(std::numeric_limits<double>::quiet_NaN());
  const std::string message = validate(spec);
  EXPECT_THAT(message, HasSubstr("nvlink_bandwidth = 0 B/s (must be > 0)"));
  EXPECT_THAT(message, HasSubstr("nic_bandwidth_per_node = -1 B/s (must be > 0)"));
  EXPECT_THAT(message, HasSubstr("gpu.hbm_bandwidth = nan B/s (must be > 0)"));
}

TEST(ValidateClusterSpec, RuntimeReservedMustLeaveUsableMemory) {
  ClusterSpec spec = a100();
  spec.gpu.runtime_reserved = spec.gpu.hbm;
  EXPECT_THAT(validate(spec), HasSubstr("gpu.runtime_reserved = 85198045184 B (must be < gpu.hbm"));
}

TEST(ValidateClusterSpec, EfficienciesMustBeFractions) {
  ClusterSpec spec = a100();
  spec.gpu.gemm_efficiency = 1.5;
  spec.nvlink_efficiency = 0.0;
  spec.gpu.attention_backward_efficiency = std::numeric_limits<double>::quiet_NaN();
  const std::string message = validate(spec);
  EXPECT_THAT(message, HasSubstr("gpu.gemm_efficiency = 1.5 (must be in (0, 1])"));
  EXPECT_THAT(message, HasSubstr("nvlink_efficiency = 0 (must be in (0, 1])"));
  EXPECT_THAT(message, HasSubstr("gpu.attention_backward_efficiency = nan"));
}

TEST(ValidateClusterSpec, SoftmaxSharesMayBeZeroButNotBeyondOne) {
  ClusterSpec spec = a100();
  spec.gpu.attention_softmax_share = 0.0;  // no head-dim term: valid
  EXPECT_EQ(validate(spec), "");
  spec.gpu.cudnn_attention_softmax_share = 1.2;
  EXPECT_THAT(validate(spec), HasSubstr("gpu.cudnn_attention_softmax_share = 1.2 (must be in "
                                        "[0, 1])"));
}

TEST(ValidateClusterSpec, LatenciesMayBeZeroButNotNegative) {
  ClusterSpec spec = a100();
  spec.network_hop_latency = Seconds(0.0);
  EXPECT_EQ(validate(spec), "");
  spec.nvlink_hop_latency = microseconds(-1.0);
  EXPECT_THAT(validate(spec), HasSubstr("nvlink_hop_latency = -1e-06 s (must be >= 0)"));
}

TEST(ValidateClusterSpec, UnsupportedDtypeIsZeroNotNegative) {
  ClusterSpec spec = a100();
  EXPECT_EQ(spec.gpu.peak(Dtype::kFp8).value(), 0.0);  // A100: no fp8, and that is valid
  spec.gpu.peak_dense[static_cast<std::size_t>(Dtype::kFp8)] = FlopsPerSec(-1.0);
  EXPECT_THAT(validate(spec), HasSubstr("gpu.peak_dense[fp8] = -1 FLOP/s (must be >= 0)"));
}

TEST(ValidateClusterSpec, ReportsEveryProblemSeparatedBySemicolons) {
  ClusterSpec spec = a100();
  spec.nodes = 0;
  spec.nic_efficiency = 2.0;
  EXPECT_EQ(validate(spec), "nodes = 0 (must be > 0); nic_efficiency = 2 (must be in (0, 1])");
}

TEST(GpuSpec, ValidateRejectsANicLossThatLeavesNothing) {
  ClusterSpec spec = a100();
  spec.nic_busbw_loss_per_node_doubling = 1.0;
  EXPECT_EQ(validate(spec), "nic_busbw_loss_per_node_doubling = 1 (must be in [0, 1))");
}

}  // namespace
}  // namespace fsdpsim::hardware
