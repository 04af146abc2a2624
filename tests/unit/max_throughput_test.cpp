// tune/max_throughput.cpp (MaxThr): the round-robin deal.
#include <gtest/gtest.h>

#include <cmath>

#include "max_throughput.h"
#include "tuner_sim.h"

using namespace xfer;
using namespace xfer::testing;

// MaxThr: 32 channels dealt L, M, S; all cores; when Large finishes its
// channels are dealt to the others.
TEST(MaxThroughput, DealsRoundRobinAndRedealsFinishedChunks) {
  JobInfo info = wan_info({plan(ChunkKind::Small, 1000, 100'000'000), plan(ChunkKind::Medium, 100, 240'000'000),
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
