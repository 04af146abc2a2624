// What a job is promised, and whether an interval kept it (xfer/running_job.h).
#include "xfer/running_job.h"

#include <gtest/gtest.h>

using xfer::Observation;
using xfer::interval_keeps_promise;

namespace {
Observation interval(double mbps, uint64_t bytes, std::optional<double> joules) {
  Observation o;
  o.interval_s = 1;
  o.throughput_bps = mbps * 1e6;
  o.bytes_interval = bytes;
  o.joules = joules;
  return o;
}
}  // namespace

TEST(Promise, AFloorIsKeptByMovingAtLeastIt) {
  EXPECT_EQ(interval_keeps_promise(interval(100, 12'500'000, 5.0), 100e6, 0), true);
  EXPECT_EQ(interval_keeps_promise(interval(99.9, 12'487'500, 5.0), 100e6, 0), false);
  EXPECT_EQ(interval_keeps_promise(interval(99.9, 12'487'500, 5.0), 0, 0), std::nullopt) << "no promise";
}

TEST(Promise, ACeilingIsKeptBySpendingAtMostItPerGb) {
  // 1 GB for 40 J is 40 J/GB.
  EXPECT_EQ(interval_keeps_promise(interval(8000, 1'000'000'000, 40.0), 0, 40), true);
  EXPECT_EQ(interval_keeps_promise(interval(8000, 1'000'000'000, 40.5), 0, 40), false);
  EXPECT_EQ(interval_keeps_promise(interval(8000, 1'000'000'000, std::nullopt), 0, 40), std::nullopt)
      << "no energy figure: not judged";
  EXPECT_EQ(interval_keeps_promise(interval(0, 0, 40.0), 0, 40), std::nullopt) << "no bytes: not judged";
}

TEST(Promise, SettlingAndEndingIntervalsAreNotJudged) {
  Observation o = interval(10, 1'250'000, 1.0);
  o.settling = true;
  EXPECT_EQ(interval_keeps_promise(o, 100e6, 0), std::nullopt);
  o.settling = false;
  o.near_end = true;
  EXPECT_EQ(interval_keeps_promise(o, 100e6, 0), std::nullopt);
}
