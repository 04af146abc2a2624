// net/flow_accountant.cpp: an interval of a set of flows from their
// cumulative counters (cross-layer-hla.txt Algorithms 1-2: the RTT weighted
// by each flow's bytes, its change, loss per MB).
#include <gtest/gtest.h>

#include "xfer/flow_monitor.h"

namespace {

xfer::FlowCounters flow(uint64_t id, uint64_t bytes, double rtt_ms, uint32_t retrans = 0, bool closed = false) {
  xfer::FlowCounters f;
  f.id = id, f.bytes_received = bytes, f.rtt_ms = rtt_ms, f.retrans = retrans, f.closed = closed;
  return f;
}

}  // namespace

TEST(FlowAccountant, RttIsWeightedByEachFlowsBytesInTheInterval) {
  xfer::FlowAccountant a;
  // 1 MB at 40 ms and 3 MB at 80 ms over 2 s.
  xfer::FlowInterval i = a.interval({flow(1, 1000000, 40), flow(2, 3000000, 80)}, 2.0);
  EXPECT_EQ(i.bytes, 4000000u);
  EXPECT_DOUBLE_EQ(i.throughput_bps, 16e6);
  EXPECT_DOUBLE_EQ(i.rtt_ms, (40.0 * 1 + 80.0 * 3) / 4);
  EXPECT_EQ(i.delta_rtt_ms, 0) << "no previous interval to compare with";
  EXPECT_EQ(i.flows, 2);
  // Next: only flow 1 moves (1 MB more at 60 ms, 5 loss signals); flow 2 is
  // open and idle: it counts as a flow but not in the RTT.
  i = a.interval({flow(1, 2000000, 60, 5), flow(2, 3000000, 500)}, 1.0);
  EXPECT_EQ(i.bytes, 1000000u);
  EXPECT_DOUBLE_EQ(i.rtt_ms, 60);
  EXPECT_DOUBLE_EQ(i.delta_rtt_ms, 60 - 70.0);
  EXPECT_DOUBLE_EQ(i.retrans_per_mb, 5);
  EXPECT_EQ(i.flows, 2);
}

TEST(FlowAccountant, AnIdleIntervalKeepsTheLastRttForTheNextDelta) {
  xfer::FlowAccountant a;
  a.interval({flow(1, 1000, 30)}, 1);
  xfer::FlowInterval idle = a.interval({flow(1, 1000, 99)}, 1);
  EXPECT_EQ(idle.bytes, 0u);
  EXPECT_EQ(idle.rtt_ms, 0);
  EXPECT_EQ(idle.delta_rtt_ms, 0);
  EXPECT_EQ(idle.retrans_per_mb, 0);
  xfer::FlowInterval next = a.interval({flow(1, 2000, 45)}, 1);
  EXPECT_DOUBLE_EQ(next.delta_rtt_ms, 15) << "against the last interval that had an RTT";
}

TEST(FlowAccountant, AClosedFlowCountsItsLastBytesOnceAndANewFlowAllOfItsOwn) {
  xfer::FlowAccountant a;
  a.interval({flow(1, 500, 20)}, 1);
  // Flow 1 closes with 300 bytes more; flow 3 appears with 700 already received.
  xfer::FlowInterval i = a.interval({flow(1, 800, 20, 0, true), flow(3, 700, 40)}, 1);
  EXPECT_EQ(i.bytes, 1000u);
  EXPECT_EQ(i.flows, 2);
  EXPECT_DOUBLE_EQ(i.rtt_ms, (20.0 * 300 + 40.0 * 700) / 1000);
  // Flow 1 is gone; flow 3 idle.
  i = a.interval({flow(3, 700, 40)}, 1);
  EXPECT_EQ(i.bytes, 0u);
  EXPECT_EQ(i.flows, 1);
}

TEST(FlowAccountant, CountersThatGoBackwardsAddNothing) {
  xfer::FlowAccountant a;
  a.interval({flow(7, 10000, 10, 9)}, 1);
  xfer::FlowInterval i = a.interval({flow(7, 4000, 10, 2)}, 1);
  EXPECT_EQ(i.bytes, 0u);
  EXPECT_EQ(i.retrans_per_mb, 0);
}

TEST(FlowAccountant, OneLossIsOneEpisodeNotTheWindowOfOutOfOrderArrivalsBehindIt) {
  // A flow receiving 10 MB a second at 50 ms: 345 segments a round trip.
  // 690 out-of-order arrivals in the second are two losses' windows.
  xfer::FlowAccountant a;
  a.interval({flow(1, 0, 50)}, 1);
  xfer::FlowInterval i = a.interval({flow(1, 10000000, 50, 690)}, 1);
  double window = 10000000 / xfer::LossCount::kSegmentBytes * 0.05;
  EXPECT_NEAR(i.loss_events, 690 / window, 1e-9);
  EXPECT_NEAR(i.loss_events, 2, 0.01);
  xfer::LossCount l;
  l.add(i);
  // 2 of 6906 segments: 0.029%, where the arrivals themselves would say 10%.
  EXPECT_NEAR(l.pct(), 100 * 2 / (10000000 / xfer::LossCount::kSegmentBytes), 0.001);
  // One signal is one episode, however large the window; a slow flow's
  // signals (a window of one segment or less) count one each.
  i = a.interval({flow(1, 20000000, 50, 691)}, 1);
  EXPECT_DOUBLE_EQ(i.loss_events, 1);
  xfer::FlowAccountant slow;
  slow.interval({flow(2, 0, 50)}, 1);
  i = slow.interval({flow(2, 20000, 50, 3)}, 1);
  EXPECT_DOUBLE_EQ(i.loss_events, 3);
}
