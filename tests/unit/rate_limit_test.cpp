// engine/rate_limit: the token bucket a job's requests draw from.
#include <gtest/gtest.h>

#include "rate_limit.h"

using xfer::RateLimit;

namespace {

// Writes of `chunk` bytes offered every `step_us` for `seconds`, taken when
// the bucket allows: the bytes taken.
double run(RateLimit& l, uint64_t& now, double seconds, size_t chunk, uint64_t step_us) {
  double taken = 0;
  for (uint64_t end = now + uint64_t(seconds * 1e6); now < end; now += step_us)
    if (l.take(chunk, now)) taken += double(chunk);
  return taken;
}

}  // namespace

// However fast the writes come and however large, what is taken over a span
// is the rate times the span, within one write and the burst.
TEST(RateLimit, HoldsItsRateWhateverTheWrites) {
  for (size_t chunk : {1460u, 16384u, 262144u}) {
    RateLimit l;
    uint64_t now = 1'000'000;
    l.set_rate(1e6, now);  // 8 Mbit/s
    const double taken = run(l, now, 10, chunk, 100);
    EXPECT_NEAR(taken, 10e6, double(chunk) + 1e6 * RateLimit::kBurstSeconds) << chunk;
  }
}

// A lowered rate applies to the next write, a raised one too; lifted, every
// write goes; a waiting bucket says how long.
TEST(RateLimit, AChangedRateAppliesAtOnce) {
  RateLimit l;
  uint64_t now = 1'000'000;
  l.set_rate(10e6, now);
  run(l, now, 2, 65536, 100);
  l.set_rate(1e6, now);
  EXPECT_NEAR(run(l, now, 5, 65536, 100), 5e6, 65536 + 1e6 * RateLimit::kBurstSeconds);
  l.set_rate(4e6, now);
  EXPECT_NEAR(run(l, now, 5, 65536, 100), 20e6, 65536 + 4e6 * RateLimit::kBurstSeconds);
  // Taken below zero by a large write, it waits that deficit at the rate.
  l.set_rate(1e6, now);
  while (l.take(1'000'000, now)) {
  }
  const uint64_t w = l.wait_us(now);
  EXPECT_GT(w, 0u);
  EXPECT_LE(w, 1'000'000u);
  EXPECT_FALSE(l.take(1, now + w - 1000));
  EXPECT_TRUE(l.take(1, now + w + 1));
  l.set_rate(0, now);
  EXPECT_FALSE(l.active());
  for (int i = 0; i < 100; ++i) EXPECT_TRUE(l.take(1 << 20, now));
  EXPECT_EQ(l.wait_us(now), 0u);
}

// When the bucket last held a write back: never while writes stay under the
// rate; the moment of the refusal once one finds it empty (the engine's
// tail split reads it: a cap that has held nothing for half a second is not
// what slows the streams).
TEST(RateLimit, SaysWhenItLastHeldAWriteBack) {
  RateLimit l;
  uint64_t now = 1'000'000;
  l.set_rate(1e6, now);
  for (int i = 0; i < 100; ++i) {
    now += 10'000;
    ASSERT_TRUE(l.take(5'000, now));  // 0.5 MB/s of 1: never held
  }
  EXPECT_EQ(l.held_us(), 0u);
  while (l.take(100'000, now)) {
  }
  EXPECT_EQ(l.held_us(), now);
}

// Each control interval holds the rate on its own: what the bucket kept
// while the writes ran under the rate is dropped when the next interval
// begins, so a look after one under the cap moves the rate over it and a
// write, not the bucket's burst too (issue 54: a ramp's look at 113 Mbit/s,
// then 178 in the next half second under a cap of 165). A write that waits
// only for that dropped credit is not the cap holding the streams back
// (held_us stays, as the engine's tail split reads it); a debt stays owed.
TEST(RateLimit, AnIntervalMovesNoMoreThanTheRateOverIt) {
  for (bool dropped : {false, true}) {
    RateLimit l;
    uint64_t now = 1'000'000;
    l.set_rate(1e6, now);
    run(l, now, 0.5, 5'000, 10'000);  // 0.5 MB/s of 1: the bucket fills
    ASSERT_EQ(l.held_us(), 0u);
    if (dropped) l.new_interval(now);
    const double taken = run(l, now, 0.5, 1460, 100);  // as fast as they come
    if (dropped) {
      EXPECT_LE(taken, 0.5e6 + 1460 + 1);
    } else {
      EXPECT_GT(taken, 0.5e6 + 1e6 * RateLimit::kBurstSeconds * 0.9);  // the kept credit, spent
    }
  }
  // Under the rate, the waits for dropped credit hold nothing back.
  RateLimit l;
  uint64_t now = 1'000'000;
  l.set_rate(1e6, now);
  run(l, now, 0.5, 5'000, 10'000);
  l.new_interval(now);
  ASSERT_TRUE(l.take(30'000, now));
  EXPECT_FALSE(l.take(30'000, now));  // waits for 30 ms of the rate
  EXPECT_EQ(l.held_us(), 0u);
  // A debt is not forgiven: taken below zero (a write past the credit kept
  // too holds the next one back), it is owed in the next interval.
  now += 40'000;
  ASSERT_TRUE(l.take(100'000, now));
  EXPECT_FALSE(l.take(1, now));
  const uint64_t owed = l.wait_us(now);
  l.new_interval(now);
  EXPECT_EQ(l.wait_us(now), owed);
  EXPECT_NE(l.held_us(), 0u);
}

// The engine resumes a paused request once the bucket holds what libcurl
// held for it (release_rate_held): the wait is for that many bytes, at most
// a full bucket; and the credit such a request waits for is kept across a
// new interval (dropped, each interval would begin by waiting for it again).
TEST(RateLimit, WaitsForAWholeDeliveryAndKeepsTheCreditItWaitsFor) {
  RateLimit l;
  uint64_t now = 1'000'000;
  l.set_rate(1e6, now);  // the burst: 50 KB
  while (l.take(16'384, now)) {
  }
  const uint64_t to_zero = l.wait_us(now);
  EXPECT_EQ(l.wait_us(now, 30'000), to_zero + 30'000);  // 30 KB at 1 MB/s: 30 ms more
  EXPECT_EQ(l.wait_us(now, 1e9), to_zero + 50'000);     // never more than a full bucket
  now += to_zero + 20'000;                              // 20 KB in hand
  EXPECT_EQ(l.wait_us(now, 30'000), 10'000u);
  l.new_interval(now, 30'000);
  EXPECT_EQ(l.wait_us(now, 30'000), 10'000u) << "the credit waited for was dropped";
  l.new_interval(now, 5'000);
  EXPECT_EQ(l.wait_us(now, 30'000), 25'000u) << "more than was waited for was kept";
  l.new_interval(now);
  EXPECT_EQ(l.wait_us(now, 30'000), 30'000u);
}
