// tune/kernel_plan.cpp: the kernel knobs as every policy steps them.
#include <gtest/gtest.h>

#include <cmath>

#include "kernel_plan.h"
#include "max_throughput.h"
#include "min_energy.h"
#include "tuner_sim.h"

using namespace xfer;
using namespace xfer::testing;

TEST(KernelPlan, OffOrAbsentLeavesTheKernelAlone) {
  StartFacts info = wan_info({plan(ChunkKind::Small, 1000, 100'000'000)});
  Params p = MaxThroughputTuner(TunerOptions{}).init(info);  // no caps: nothing to tune
  EXPECT_EQ(p.cores, 0);
  EXPECT_EQ(p.freq_khz, 0);
  info.kernel.cores = true, info.kernel.cores_present = 4;
  TunerOptions off;
  off.kernel = false;
  p = MaxThroughputTuner(off).init(info);
  EXPECT_EQ(p.cores, 0);
}

// The kernel knobs as data: stepped down in order (frequency, then cores),
// each step a typed decision, a step that costs more undone and that knob
// left where it is.
TEST(KernelPlan, KnobsStepDownInOrderAndComeBackWhenDearer) {
  KernelCaps c;
  c.cores = true, c.cores_present = 4, c.min_cores = 1;
  c.freq = true, c.freqs_khz = {1200000, 1800000, 2400000};
  tune::KernelPlan k;
  Params p;
  p.chunks = {{32, 1, 1}};
  k.init(c, true, tune::KernelPlan::Goal::Lower, 32, p);
  EXPECT_EQ(p.cores, 4);
  EXPECT_EQ(p.freq_khz, 2400000);
  using Kind = tune::KernelStep::Kind;
  auto s = k.step(true, 1.0, 32, p);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->kind, Kind::TryLower);
  EXPECT_EQ(s->knob, "frequency");
  EXPECT_EQ(p.freq_khz, 1800000);
  s = k.step(true, 1.0, 32, p);  // held: the next one down
  EXPECT_EQ(s->kind, Kind::TryLower);
  EXPECT_EQ(p.freq_khz, 1200000);
  s = k.step(true, 2.0, 32, p);  // J/byte doubled: undone, frequency settled
  EXPECT_EQ(s->kind, Kind::Undone);
  EXPECT_EQ(p.freq_khz, 1800000);
  s = k.step(true, 1.0, 32, p);  // then the cores
  EXPECT_EQ(s->kind, Kind::TryLower);
  EXPECT_EQ(s->knob, "cores");
  EXPECT_EQ(s->value, 3);
  s = k.step(false, 1.0, 32, p);  // the goal missed: back up
  EXPECT_EQ(s->kind, Kind::Undone);
  EXPECT_EQ(p.cores, 4);
  EXPECT_FALSE(k.step(true, 1.0, 32, p));  // both settled: no change
  EXPECT_EQ(k.summary()["changes"], 5);
}

// Hold (the hla policies): the levels the table names, each put at the
// nearest level the kernel layer has, and kept; 0 leaves a knob alone.
TEST(KernelPlan, HoldPutsEachKnobAtTheNearestLevelAndKeepsIt) {
  KernelCaps caps;
  caps.cores = true, caps.cores_present = 8, caps.min_cores = 2;
  caps.freq = true, caps.freqs_khz = {800000, 1600000, 2400000};
  tune::KernelPlan plan;
  Params want, p;
  want.cores = 16, want.freq_khz = 1500000;
  std::string said = plan.hold(caps, true, want, p);
  EXPECT_EQ(p.cores, 8) << "the most the machine has";
  EXPECT_EQ(p.freq_khz, 1600000) << "the nearest level";
  EXPECT_NE(said.find("16 cores asked, 8 within reach"), std::string::npos) << said;
  EXPECT_NE(said.find("1500000 kHz asked, 1600000 within reach"), std::string::npos) << said;
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(plan.step(i % 2 == 0, 1.0, 4, p, 99.0).has_value()) << "a hold is not stepped";
  EXPECT_EQ(p.cores, 8);
  want.cores = 1, want.freq_khz = 0;
  EXPECT_NE(plan.hold(caps, true, want, p), "");
  EXPECT_EQ(p.cores, 2) << "never under the policy's floor";
  EXPECT_EQ(p.freq_khz, 0) << "0: left as the kernel has it";
  want.cores = 4;
  EXPECT_EQ(plan.hold(caps, false, want, p), "");
  EXPECT_EQ(p.cores, 0) << "the kernel layer off: nothing set";
}
