// tune/static_tuner.cpp: the caller's params, passed through.
#include <gtest/gtest.h>

#include <cmath>

#include "static_tuner.h"
#include "tuner_sim.h"

using namespace xfer;
using namespace xfer::testing;

TEST(StaticTuner, PassesCoresAndFrequencyThrough) {
  StartFacts info = wan_info({plan(ChunkKind::Small, 10, 1000)});
  info.kernel.cores = true, info.kernel.cores_present = 2;
  StaticTuner t({4, 2, 8}, 1, 1800000);
  Params p = t.init(info);
  EXPECT_EQ(p.chunks[0], (ChunkParams{4, 2, 8}));
  EXPECT_EQ(p.cores, 1);
  EXPECT_EQ(p.freq_khz, 0);  // no cpufreq driver in the caps
  EXPECT_NE(p.reason.find("no cpufreq driver"), std::string::npos);
}

// A sweep's cores go through the same controller: the nearest level the
// machine has, and a point asking for cores where core control is off says so.
TEST(SweepTuner, CoresGoThroughTheKernelControllerAtEachPoint) {
  StartFacts info = wan_info({plan(ChunkKind::Small, 10, 1000)});
  info.kernel.cores = true, info.kernel.cores_present = 2, info.kernel.min_cores = 1;
  SweepTuner t({{2, 1, 1, 4}, {1, 1, 1, 1}}, 1);
  Params p = t.init(info);
  EXPECT_EQ(p.chunks[0], (ChunkParams{2, 1, 1}));
  EXPECT_EQ(p.cores, 2);
  EXPECT_NE(p.reason.find("4 cores asked, 2 within reach"), std::string::npos) << p.reason;
  std::optional<Params> next = t.decide(Observation{});
  ASSERT_TRUE(next);
  EXPECT_EQ(next->cores, 1);
  EXPECT_EQ(next->reason, "sweep: point 2 of 2");

  info.kernel.cores = false;
  SweepTuner off({{1, 1, 1, 2}}, 1);
  Params q = off.init(info);
  EXPECT_EQ(q.cores, 0);
  EXPECT_NE(q.reason.find("2 cores asked for but core control is off"), std::string::npos) << q.reason;
}
