// MinE formulas (energy-aware-transfer-algorithms.txt Algorithm 1, lines 8-10)
// against values worked by hand.
#include <unistd.h>

#include <filesystem>

#include "common.h"
#include "min_energy.h"
#include "tuner_sim.h"

#include <gtest/gtest.h>

using namespace xfer;
using namespace xfer::testing;

TEST(MinEnergy, FormulasByHand) {
  // BDP = 500 Mbit/s * 40 ms = 2,500,000 B; avg html 100,000 B; buf 4 MiB.
  EXPECT_EQ(xfer::tune::pipelining(2'500'000, 100'000), 25);       // ceil(25)
  EXPECT_EQ(xfer::tune::parallelism(2'500'000, 100'000, 4194304), 1);  // max(min(1,1),1)
  EXPECT_EQ(MinEnergyTuner::concurrency(2'500'000, 100'000, 32), 17);  // min(25, ceil(33/2)=17)
  // Video avg 220 MB with buf 1 MB: p = min(ceil(2.5e6/1e6)=3, ceil(220)=220) = 3.
  EXPECT_EQ(xfer::tune::parallelism(2'500'000, 220e6, 1'000'000), 3);
  EXPECT_EQ(xfer::tune::pipelining(2'500'000, 220e6), 1);
  EXPECT_EQ(MinEnergyTuner::concurrency(2'500'000, 220e6, 15), 1);     // ceil(0.011) = 1
}

namespace {

// BDP 2.5 MB, a 1 MB TCP buffer, and a chunk of each kind: Small (avg
// 100 KB), Medium (avg 2.4 MB), Large (one 220 MB file).
StartFacts three_chunks() {
  StartFacts info;
  info.bdp_bytes = 2'500'000;
  info.tcp_buf_bytes = 1'000'000;
  info.max_channels = 32;
  xfer::ChunkPlan s{xfer::ChunkKind::Small, {0, 1}, 200'000};
  xfer::ChunkPlan m{xfer::ChunkKind::Medium, {2, 3}, 4'800'000};
  xfer::ChunkPlan l{xfer::ChunkKind::Large, {4}, 220'000'000};
  info.chunks = {s, m, l};
  return info;
}

}  // namespace

TEST(MinEnergy, ChannelsShrinkFromSmallToLarge) {
  StartFacts info = three_chunks();
  MinEnergyTuner t;
  Params p = t.init(info);
  ASSERT_EQ(p.chunks.size(), 3u);
  // Small: pp 25, p 1, cc min(25, 17) = 17; avail 15.
  EXPECT_EQ(p.chunks[0], (xfer::ChunkParams{17, 1, 25}));
  // Medium: pp ceil(2.5/2.4) = 2, p max(min(3, 3), 1) = 3, cc min(2, 8) = 2.
  EXPECT_EQ(p.chunks[1], (xfer::ChunkParams{2, 3, 2}));
  // Large keeps a single channel; p = min(3, 220) = 3.
  EXPECT_EQ(p.chunks[2], (xfer::ChunkParams{1, 3, 1}));
  EXPECT_FALSE(t.decide(xfer::Observation{}).has_value());
}

// Over HTTP/2 a channel's pp streams are in flight at once: the same chunks
// get only the channels pp leaves short of ceil(BDP / avg) files in flight,
// and at least ceil(BDP / buf) so that the TCP buffers hold the BDP.
TEST(MinEnergy, OverHttp2StreamsStandInForChannels) {
  StartFacts info = three_chunks();
  info.multiplexed = true;
  MinEnergyTuner t;
  Params p = t.init(info);
  ASSERT_EQ(p.chunks.size(), 3u);
  // Small: 25 files in flight on pp 25 streams: 1 channel, but the 1 MB
  // buffer needs ceil(2.5) = 3 connections' worth: cc 3 (paper: 17).
  EXPECT_EQ(p.chunks[0], (xfer::ChunkParams{3, 1, 25}));
  // Medium: pp 2 covers ceil(2.5 / 2.4) = 2 files, and the channel's p = 3
  // connections the 3 buffers: cc 1 (paper: 2).
  EXPECT_EQ(p.chunks[1], (xfer::ChunkParams{1, 3, 2}));
  EXPECT_EQ(p.chunks[2], (xfer::ChunkParams{1, 3, 1}));  // pp 1: nothing multiplexed
  // A buffer that holds the BDP: one channel carries the small files.
  info.tcp_buf_bytes = 32 << 20;
  EXPECT_EQ(MinEnergyTuner().init(info).chunks[0], (xfer::ChunkParams{1, 1, 25}));
  EXPECT_EQ(MinEnergyTuner::multiplexed_channels(info, 100'000, 5, 1), 5);  // 25 files on 5 streams each
  EXPECT_NE(t.init(info).reason.find("HTTP/2"), std::string::npos);
}

namespace {

// One interval of a job whose only chunk is Large: its throughput and the
// retransmits its flows saw.
xfer::Observation large_interval(double mbps, double retrans_per_mb, bool settling = false) {
  xfer::Observation o;
  o.settling = settling;
  o.bytes_interval = uint64_t(mbps * 1e6 / 8 * 5);
  xfer::ChunkObservation c;
  c.kind = xfer::ChunkKind::Large;
  c.throughput_bps = mbps * 1e6;
  c.flow = xfer::FlowInterval{};
  c.flow->retrans_per_mb = retrans_per_mb;
  c.flow->flows = 1;
  o.chunks = {c};
  return o;
}

StartFacts one_large_chunk() {
  StartFacts info;
  info.bdp_bytes = 5'000'000;
  info.tcp_buf_bytes = 32 << 20;  // p = 1 by the formula
  info.bandwidth_bps = 500e6;
  info.chunks = {xfer::ChunkPlan{xfer::ChunkKind::Large, {0, 1}, 444'000'000}};
  return info;
}

}  // namespace

// A loss-bound stream of large files (lossy-wan: 210 of 500 Mbit/s with
// hundreds of retransmits per MB): p grows once, and stays only if the
// chunk then moves kKeepGain more; a clean or a fast stream is left alone.
TEST(MinEnergy, LossBoundLargeFilesTryMoreStreamsOnceAndKeepThemOnlyIfTheyPay) {
  MinEnergyTuner kept({.kernel = false});
  ASSERT_EQ(kept.init(one_large_chunk()).chunks[0].p, 1);
  auto more = kept.decide(large_interval(203, 263, true));  // the first interval settles, but is measured
  ASSERT_TRUE(more.has_value());
  EXPECT_EQ(more->chunks[0].p, 3);  // ceil(500 / 203) streams fill the link at 203 each
  EXPECT_NE(more->reason.find("p 1 -> 3"), std::string::npos) << more->reason;
  EXPECT_FALSE(kept.decide(large_interval(300, 200, true)).has_value());  // the change's own interval
  EXPECT_FALSE(kept.decide(large_interval(380, 150)).has_value());        // 1.87x: kept
  EXPECT_FALSE(kept.decide(large_interval(150, 300)).has_value());        // tried once only

  MinEnergyTuner undone({.kernel = false});
  undone.init(one_large_chunk());
  ASSERT_TRUE(undone.decide(large_interval(203, 263, true)).has_value());
  auto back = undone.decide(large_interval(220, 250));  // 1.08x: not worth a second stream
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->chunks[0].p, 1);
  EXPECT_NE(back->reason.find("did not pay"), std::string::npos) << back->reason;

  MinEnergyTuner clean({.kernel = false}), fast({.kernel = false}), shared({.kernel = false});
  clean.init(one_large_chunk());
  fast.init(one_large_chunk());
  EXPECT_FALSE(clean.decide(large_interval(203, 0, true)).has_value());  // slow but no loss: not the path's loss
  EXPECT_FALSE(fast.decide(large_interval(455, 3, true)).has_value());   // most of the link already
  // Other chunks of the job use most of the link: what is left is not idle.
  StartFacts two = one_large_chunk();
  two.chunks.insert(two.chunks.begin(), xfer::ChunkPlan{xfer::ChunkKind::Small, {2}, 100'000});
  shared.init(two);
  xfer::Observation o = large_interval(150, 200, true);
  xfer::ChunkObservation small;
  small.kind = xfer::ChunkKind::Small;
  small.throughput_bps = 300e6;
  o.chunks.insert(o.chunks.begin(), small);
  EXPECT_FALSE(shared.decide(o).has_value());  // 150 of the 200 left
}

// Where the RTT is known, the probe does not wait for whole intervals: a
// settling look after slow start (it decides nothing), a measuring look that
// decides, and the same two looks to judge the change; then one interval at
// a time. The kernel layer waits while the probe is being judged.
TEST(MinEnergy, TheLossProbeLooksSoonerThanAnInterval) {
  StartFacts info = one_large_chunk();
  info.rtt_s = 0.08;
  MinEnergyTuner t({.kernel = false});
  ASSERT_EQ(t.init(info).chunks[0].p, 1);
  ASSERT_TRUE(t.next_look_s().has_value());
  EXPECT_NEAR(*t.next_look_s(), 12 * 0.08 + 0.3, 1e-9);              // the settling look
  EXPECT_FALSE(t.decide(large_interval(150, 300, true)).has_value());  // slow start: nothing decided
  ASSERT_TRUE(t.next_look_s().has_value());
  EXPECT_NEAR(*t.next_look_s(), 1.0, 1e-9);  // 10 RTTs = 0.8 s, at least 1 s
  auto more = t.decide(large_interval(203, 263));
  ASSERT_TRUE(more.has_value());
  EXPECT_EQ(more->chunks[0].p, 3);
  EXPECT_NEAR(t.next_look_s().value_or(0), 12 * 0.08 + 0.3, 1e-9);  // the change settles
  EXPECT_FALSE(t.decide(large_interval(300, 200, true)).has_value());
  EXPECT_NEAR(t.next_look_s().value_or(0), 1.0, 1e-9);
  EXPECT_FALSE(t.decide(large_interval(400, 150)).has_value());  // kept
  EXPECT_FALSE(t.next_look_s().has_value());                     // whole intervals from now on

  // A clean, fast stream: two quick looks, then whole intervals.
  MinEnergyTuner fast({.kernel = false});
  fast.init(info);
  EXPECT_FALSE(fast.decide(large_interval(300, 0, true)).has_value());
  EXPECT_FALSE(fast.decide(large_interval(455, 0)).has_value());
  EXPECT_FALSE(fast.next_look_s().has_value());

  // No RTT, no Large chunk, or no link rate: no quick looks.
  EXPECT_FALSE([] {
    MinEnergyTuner u;
    u.init(one_large_chunk());
    return u.next_look_s();
  }().has_value());
  StartFacts small = info;
  small.chunks = {xfer::ChunkPlan{xfer::ChunkKind::Small, {0}, 100'000}};
  MinEnergyTuner s;
  s.init(small);
  EXPECT_FALSE(s.next_look_s().has_value());
  StartFacts no_rate = info;
  no_rate.bandwidth_bps = 0;
  MinEnergyTuner n;
  n.init(no_rate);
  EXPECT_FALSE(n.next_look_s().has_value());
}


// MinE with the kernel layer: one core busy at 200 Mbit/s, two at 400; the
// cost (J/byte) is lowest at 1.8 GHz and 2 cores; 1.2 GHz costs more (the
// transfer becomes CPU-bound). The tuner starts at the floor, adds the core
// the busy CPU asks for because it pays, steps the frequency down, keeps
// what pays and undoes what does not.
TEST(MinEnergy, KernelAddsACoreOnlyWhenBusyAndCheaperThenStepsTheFrequencyDown) {
  StartFacts info = wan_info({plan(ChunkKind::Small, 1000, 100'000'000)}, 32);
  info.kernel.cores = true, info.kernel.cores_mode = "hotplug", info.kernel.cores_present = 4;
  info.kernel.cores_online = 4;
  info.kernel.freq = true, info.kernel.freqs_khz = {1200000, 1800000, 2400000};
  auto mbps = [](const Params& p) { return p.cores < 2 ? 200.0 : p.freq_khz < 1500000 ? 250.0 : 400.0; };
  auto watts = [](const Params& p) {
    double f = p.freq_khz >= 2400000 ? 12 : p.freq_khz >= 1800000 ? 6 : 5;
    return 5 + 3.0 * p.cores + f;
  };
  auto busy = [](const Params& p) { return p.cores < 2 ? 97.0 : 55.0; };
  MinEnergyTuner t;
  SimEngine sim{mbps, watts, busy};
  Params start = sim.run(t, info, 0);
  EXPECT_EQ(start.cores, 1);  // the floor
  EXPECT_EQ(start.freq_khz, 2400000);
  MinEnergyTuner t2;
  SimEngine sim2{mbps, watts, busy};
  Params end = sim2.run(t2, info, 12);
  EXPECT_EQ(end.freq_khz, 1800000);
  EXPECT_EQ(end.cores, 2);
  bool tried_1200 = false, tried_3 = false;
  for (const Params& p : sim2.applied) tried_1200 |= p.freq_khz == 1200000, tried_3 |= p.cores > 2;
  EXPECT_TRUE(tried_1200);
  EXPECT_FALSE(tried_3) << "two cores at 55% are not busy: no third is tried";
  EXPECT_EQ(end.chunks, start.chunks);  // MinE's application layer is fixed
}

// Busy, but the link is the limit: a second core brings no throughput, only
// its idle draw. It is tried once, undone, and not tried again.
TEST(MinEnergy, ACoreThatDoesNotPayIsUndoneAndNotTriedAgain) {
  StartFacts info = wan_info({plan(ChunkKind::Small, 1000, 100'000'000)}, 32);
  info.kernel.cores = true, info.kernel.cores_mode = "hotplug", info.kernel.cores_present = 2;
  info.kernel.cores_online = 2;
  MinEnergyTuner t;
  SimEngine sim{[](const Params&) { return 200.0; }, [](const Params& p) { return 10 + 11.2 * p.cores; },
                [](const Params&) { return 90.0; }};
  Params end = sim.run(t, info, 10);
  EXPECT_EQ(end.cores, 1);
  int raised = 0;
  for (size_t i = 1; i < sim.applied.size(); ++i) raised += sim.applied[i].cores > sim.applied[i - 1].cores;
  EXPECT_EQ(raised, 1);
  // Without a utilisation figure nothing is busy: the floor stays.
  MinEnergyTuner t2;
  SimEngine quiet{[](const Params& p) { return 200.0 * p.cores; }, [](const Params& p) { return 10 + 11.2 * p.cores; }};
  EXPECT_EQ(quiet.run(t2, info, 10).cores, 1);
}
