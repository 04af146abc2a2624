// daemon/sla_tally: a job's promise and how its intervals kept it; the
// operator is told at the first miss and when it holds again, not at every
// interval. Through D-Bus and the metrics: Observability.* and Metrics.*.
#include "sla_tally.h"

#include <gtest/gtest.h>

using xferd::SlaTally;

namespace {
xfer::Observation interval(double mbps) {
  xfer::Observation o;
  o.interval_s = 1;
  o.throughput_bps = mbps * 1e6;
  o.bytes_interval = uint64_t(mbps * 1e6 / 8);
  o.joules = 1.0;
  return o;
}
}  // namespace

TEST(SlaTally, AFloorIsTalliedAndTheOperatorToldAtTheFirstMissAndWhenItHoldsAgain) {
  SlaTally t;
  t.floor_bps = 100e6;
  EXPECT_EQ(t.promise(), "floor 100 Mbit/s");
  SlaTally::Turn turn;
  EXPECT_EQ(t.judge(interval(120), &turn), true);
  EXPECT_EQ(turn, SlaTally::Turn::Same) << "met from the start: nothing to tell";
  EXPECT_EQ(t.judge(interval(80), &turn), false);
  EXPECT_EQ(turn, SlaTally::Turn::FirstMiss);
  EXPECT_EQ(t.judge(interval(70), &turn), false);
  EXPECT_EQ(turn, SlaTally::Turn::Same) << "a miss in a row is told once";
  xfer::Observation settling = interval(10);
  settling.settling = true;
  EXPECT_EQ(t.judge(settling, &turn), std::nullopt);
  EXPECT_EQ(turn, SlaTally::Turn::Same);
  EXPECT_EQ(t.judge(interval(101), &turn), true);
  EXPECT_EQ(turn, SlaTally::Turn::MetAgain);
  EXPECT_EQ(t.met, 2u);
  EXPECT_EQ(t.missed, 2u);
  EXPECT_EQ(t.last, true);
  nlohmann::json j = t.to_json();
  EXPECT_EQ(j["promise"], "floor 100 Mbit/s");
  EXPECT_EQ(j["intervals_met"], 2);
  EXPECT_EQ(j["intervals_missed"], 2);
  EXPECT_EQ(j["floor_mbps"], 100);
  EXPECT_FALSE(j.contains("ceiling_j_per_gb"));
}

TEST(SlaTally, ACeilingAndNoPromise) {
  SlaTally c;
  c.ceiling_j_per_gb = 50;
  EXPECT_EQ(c.promise(), "ceiling 50 J/GB");
  EXPECT_EQ(c.judge(interval(80)), false) << "1 J for 10 MB is 100 J/GB";
  EXPECT_EQ(c.judge(interval(200)), true) << "1 J for 25 MB is 40 J/GB";
  EXPECT_EQ(c.met, 1u);
  EXPECT_EQ(c.missed, 1u);
  EXPECT_EQ(c.to_json()["ceiling_j_per_gb"], 50);
  SlaTally none;
  EXPECT_EQ(none.promise(), "");
  EXPECT_EQ(none.judge(interval(80)), std::nullopt);
  EXPECT_EQ(none.met + none.missed, 0u);
  EXPECT_FALSE(none.last.has_value());
}
