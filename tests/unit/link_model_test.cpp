// xfer-linkemu's link arithmetic: serialization at the rate, delay, tail
// drop, loss, and no reordering under jitter.
#include "link_model.h"

#include <gtest/gtest.h>

using linkemu::LinkModel;
using linkemu::LinkParams;

constexpr uint64_t ms = 1'000'000;  // ns

TEST(LinkModel, SerializesAtTheRateThenAddsTheDelay) {
  LinkModel m(LinkParams{8e6, 0.020, 0, 0, 1'000'000}, 1);  // 8 Mbit/s: 1000 bytes take 1 ms
  EXPECT_EQ(*m.admit(0, 1000), 1 * ms + 20 * ms);
  EXPECT_EQ(*m.admit(0, 1000), 2 * ms + 20 * ms);  // queued behind the first
  EXPECT_EQ(m.backlog_bytes(0), 2000u);
  EXPECT_EQ(*m.admit(10 * ms, 1000), 11 * ms + 20 * ms);  // the link was idle again
  EXPECT_EQ(m.counters().packets, 3u);
  EXPECT_EQ(m.counters().bytes, 3000u);
}

TEST(LinkModel, TailDropsWhenTheQueueIsFull) {
  LinkModel m(LinkParams{8e6, 0, 0, 0, 3000}, 1);
  EXPECT_TRUE(m.admit(0, 1000));
  EXPECT_TRUE(m.admit(0, 1000));
  EXPECT_TRUE(m.admit(0, 1000));
  EXPECT_FALSE(m.admit(0, 1000));  // 4000 > 3000
  EXPECT_EQ(m.counters().dropped_queue, 1u);
  EXPECT_TRUE(m.admit(1 * ms, 1000));  // one packet has left
}

TEST(LinkModel, DefaultQueueIsOneBdp) {
  LinkModel m(LinkParams{100e6, 0.020, 0, 0, 0}, 1);  // 100 Mbit/s x 40 ms RTT = 500,000 bytes
  EXPECT_EQ(m.params().queue_bytes, 500'000u);
}

TEST(LinkModel, LossRateIsTheConfiguredProbability) {
  LinkModel m(LinkParams{1e12, 0, 0, 0.02, 1ull << 40}, 7);
  int lost = 0;
  for (int i = 0; i < 100000; ++i) lost += !m.admit(uint64_t(i) * ms, 100).has_value();
  EXPECT_NEAR(lost / 100000.0, 0.02, 0.003);
  EXPECT_EQ(m.counters().dropped_loss, uint64_t(lost));
}

TEST(LinkModel, JitterNeverReorders) {
  LinkModel m(LinkParams{1e9, 0.010, 0.005, 0, 1ull << 30}, 3);
  uint64_t last = 0;
  for (int i = 0; i < 10000; ++i) {
    uint64_t at = *m.admit(uint64_t(i) * 100'000, 125);  // every 0.1 ms: jitter would reorder
    EXPECT_GE(at, last);
    last = at;
  }
}

TEST(LinkModel, JitterSpreadsTheDelay) {
  LinkModel m(LinkParams{1e9, 0.010, 0.005, 0, 1ull << 30}, 3);
  uint64_t lo = UINT64_MAX, hi = 0;
  for (int i = 0; i < 2000; ++i) {
    uint64_t now = uint64_t(i) * 20 * ms;  // sparse: ordering never binds
    uint64_t d = *m.admit(now, 125) - now;
    lo = std::min(lo, d), hi = std::max(hi, d);
  }
  EXPECT_LT(lo, 6 * ms);   // near delay - jitter
  EXPECT_GT(hi, 14 * ms);  // near delay + jitter
  EXPECT_GE(lo, 5 * ms);
  EXPECT_LE(hi, 15 * ms + 1000);
}
