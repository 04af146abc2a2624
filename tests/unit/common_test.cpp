// tune/common.cpp: the policies' formulas against numbers worked by hand.
#include <gtest/gtest.h>

#include <cmath>

#include "common.h"
#include "kernel_plan.h"
#include "energy_efficient.h"
#include "throughput_target.h"
#include "max_throughput.h"
#include "tuner_sim.h"

using namespace xfer;
using namespace xfer::testing;

// energy-aware Alg. 2 l. 7-12 by hand for the wan html / image / video sets:
// w = ln(bytes) * ln(files): S ln(1e8) ln(1000) = 18.421 * 6.908 = 127.25,
// M ln(2.4e8) ln(100) = 19.296 * 4.605 = 88.86, L ln(4.44e8) ln(2) = 19.911 * 0.693 = 13.80.
TEST(TunerFormulas, HteeWeightsAndChannelSplitByHand) {
  std::vector<ChunkPlan> c = {plan(ChunkKind::Small, 1000, 100'000'000), plan(ChunkKind::Medium, 100, 240'000'000),
                              plan(ChunkKind::Large, 2, 444'000'000)};
  auto w = tune::chunk_weights(c);
  double total = 127.25 + 88.86 + 13.80;
  EXPECT_NEAR(w[0], 127.25 / total, 2e-3);
  EXPECT_NEAR(w[1], 88.86 / total, 2e-3);
  EXPECT_NEAR(w[2], 13.80 / total, 2e-3);
  // 16 channels: floor(8.85, 6.18, 0.96) = 8, 6, 0 -> Large raised to 1; the
  // one left goes to the largest remainder, Large's 0.96: S 8, M 6, L 2.
  EXPECT_EQ(tune::split_by_weight(16, c, w, {true, true, true}), (std::vector<int>{8, 6, 2}));
  // Large held to one channel (SLAEE): the spare goes to Small (0.85): 9, 6, 1.
  EXPECT_EQ(tune::split_by_weight(16, c, w, {true, true, true}, 1), (std::vector<int>{9, 6, 1}));
  // A finished chunk gets nothing; the others share all 16.
  auto s = tune::split_by_weight(16, c, w, {false, true, true});
  EXPECT_EQ(s[0], 0);
  EXPECT_EQ(s[1] + s[2], 16);
}

// http-sla Alg. 2: channel i to Large, Medium, Small in turn.
TEST(TunerFormulas, RoundRobinDealByHand) {
  std::vector<ChunkPlan> c = {plan(ChunkKind::Small, 10, 1), plan(ChunkKind::Medium, 10, 1), plan(ChunkKind::Large, 3, 1)};
  EXPECT_EQ(tune::deal_round_robin(32, c, {true, true, true}), (std::vector<int>{10, 11, 11}));
  EXPECT_EQ(tune::deal_round_robin(4, c, {true, true, true}), (std::vector<int>{1, 1, 2}));
  EXPECT_EQ(tune::deal_round_robin(32, c, {true, true, false}), (std::vector<int>{16, 16, 0}));
}

// SLAEE l. 11: cc * target / actual, at least one more than now.
TEST(TunerFormulas, TargetJumpByHand) {
  EXPECT_EQ(ThroughputTargetTuner::jump(1, 200e6, 40e6, 16), 5);   // ceil(1 * 200 / 40)
  EXPECT_EQ(ThroughputTargetTuner::jump(2, 200e6, 60e6, 16), 7);   // ceil(6.67)
  EXPECT_EQ(ThroughputTargetTuner::jump(1, 200e6, 190e6, 16), 2);  // ceil(1.05) = 2
  EXPECT_EQ(ThroughputTargetTuner::jump(1, 900e6, 10e6, 16), 16);  // capped at maxChannel
}

TEST(TunerFormulas, SearchLevels) {
  EXPECT_EQ(EnergyEfficientTuner::levels(16, 4, {}), (std::vector<int>{1, 5, 9, 13}));
  EXPECT_EQ(EnergyEfficientTuner::levels(10, 2, {}), (std::vector<int>{1, 3, 5, 7, 9}));
  EXPECT_EQ(EnergyEfficientTuner::levels(16, 4, {9, 1, 9, 40}), (std::vector<int>{1, 9, 16}));
}

TEST(TunerFormulas, CoresFollowChannels) {
  KernelCaps k;
  k.cores = true, k.cores_present = 4, k.min_cores = 1;
  EXPECT_EQ(tune::KernelPlan::cores_for(1, k), 1);
  EXPECT_EQ(tune::KernelPlan::cores_for(8, k), 1);
  EXPECT_EQ(tune::KernelPlan::cores_for(9, k), 2);
  EXPECT_EQ(tune::KernelPlan::cores_for(100, k), 4);
  k.min_cores = 2;
  EXPECT_EQ(tune::KernelPlan::cores_for(1, k), 2);
}
