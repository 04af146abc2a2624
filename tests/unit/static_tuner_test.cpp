// tune/static_tuner.cpp: the caller's params, passed through.
#include <gtest/gtest.h>

#include <cmath>

#include "static_tuner.h"
#include "tuner_sim.h"

using namespace xfer;
using namespace xfer::testing;

TEST(StaticTuner, PassesCoresAndFrequencyThrough) {
  JobInfo info = wan_info({plan(ChunkKind::Small, 10, 1000)});
  info.kernel.cores = true, info.kernel.cores_present = 2;
  StaticTuner t({4, 2, 8}, 1, 1800000);
  Params p = t.init(info);
  EXPECT_EQ(p.chunks[0], (ChunkParams{4, 2, 8}));
  EXPECT_EQ(p.cores, 1);
  EXPECT_EQ(p.freq_khz, 0);  // no cpufreq driver in the caps
  EXPECT_NE(p.reason.find("no cpufreq driver"), std::string::npos);
}
