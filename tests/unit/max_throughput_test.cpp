// tune/max_throughput.cpp (MaxThr): the round-robin deal, and Falcon's search.
#include <gtest/gtest.h>

#include <cmath>

#include "max_throughput.h"
#include "tuner_sim.h"

using namespace xfer;
using namespace xfer::testing;

// MaxThr: 32 channels dealt L, M, S; all cores; when Large finishes its
// channels are dealt to the others.
TEST(MaxThroughput, DealsRoundRobinAndRedealsFinishedChunks) {
  StartFacts info = wan_info({plan(ChunkKind::Small, 1000, 100'000'000), plan(ChunkKind::Medium, 100, 240'000'000),
                           plan(ChunkKind::Large, 3, 700'000'000)},
                          32);
  info.kernel.cores = true, info.kernel.cores_present = 4, info.kernel.cores_online = 2;
  MaxThroughputTuner t;
  Params p = t.init(info);
  EXPECT_EQ(p.chunks[0].cc, 10);
  EXPECT_EQ(p.chunks[1].cc, 11);
  EXPECT_EQ(p.chunks[2].cc, 11);
  EXPECT_EQ(p.cores, 4);
  SimEngine sim{[](const Params&) { return 100.0; }, [](const Params&) { return 10.0; }};
  EXPECT_FALSE(t.decide(sim.step(p, 3)).has_value());
  auto next = t.decide(sim.step(p, 3, {false, false, true}));
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->chunks[0].cc, 16);
  EXPECT_EQ(next->chunks[1].cc, 16);
}

// With Falcon's cost per stream (K = 1.02) the channels are searched for the
// most throughput / K^n: on a link where each stream adds less and less
// (T = 300 (1 - e^(-n/4)) Mbit/s, best utility at n ~ 10) the search climbs
// from 2, settles around the optimum and never takes all 32 channels.
TEST(MaxThroughput, FalconsCostPerStreamSettlesWhereAStreamAddsLessThanItCosts) {
  StartFacts info = wan_info({plan(ChunkKind::Large, 4, 800'000'000)}, 32);
  TunerOptions o;
  o.stream_cost = 1.02;
  MaxThroughputTuner t(o);
  Params p = t.init(info);
  EXPECT_EQ(p.total_channels(), 2);
  SimEngine sim{[](const Params& q) { return 300 * (1 - std::exp(-double(q.total_channels()) / 4)); },
                [](const Params&) { return 10.0; }};
  std::vector<int> seen;
  for (int i = 0; i < 80; ++i) {
    if (auto next = t.decide(sim.step(p, 1))) p = *next;
    seen.push_back(p.total_channels());
  }
  int most = 0;
  double late = 0;
  for (size_t i = 0; i < seen.size(); ++i) {
    most = std::max(most, seen[i]);
    if (i >= 60) late += seen[i] / 20.0;
  }
  EXPECT_LE(most, 20);
  EXPECT_NEAR(late, 10, 3) << "the last 20 intervals averaged " << late << " channels";
  // Without the cost: all 32.
  MaxThroughputTuner plain;
  EXPECT_EQ(plain.init(info).total_channels(), 32);
}
