// Cross-LayerHLA's online algorithms (issue 15): hla-throughput
// (Algorithm 2) and hla-energy (Algorithm 1) against a simulated engine
// whose throughput and power follow known functions of cc and of the
// external load, which steps up and down. The table is made by hand: one
// path, one dataset, three load bands whose optima differ, so the test
// knows which surface each phase must be on; and at most three switches.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <set>
#include <tuple>

#include "xfer/hla.h"
#include "xfer/tuner.h"

using namespace xfer;

namespace {

// Each band's optimum: cc 2 (load 0-0.2), 4 (0.2-0.5), 8 (0.5-1).
const int kBandCc[3] = {2, 4, 8};
const double kBandLo[3] = {0, 0.2, 0.5}, kBandHi[3] = {0.2, 0.5, 1};

std::shared_ptr<const hla::ParamTable> table() {
  auto t = std::make_shared<hla::ParamTable>();
  t->history = "hand-made";
  for (int b = 0; b < 3; ++b) {
    hla::TableStratum s;
    s.id = "P1/D1/L" + std::to_string(b + 1);
    s.link_mbps = 100, s.rtt_ms = 40, s.loss_pct = 0;
    s.files = 1000, s.bytes = 1e10, s.size_mean = 1e7, s.size_sd = 1e5;
    s.load_lo = kBandLo[b], s.load_hi = kBandHi[b];
    s.rows = 30;
    for (double level : hla::kThroughputLevels) {
      hla::TableEntry e{"throughput", level, level * 100, {}};
      e.choice = {{kBandCc[b], 1, 1, 2, 0}, level * 100, 50, true};
      s.entries.push_back(e);
    }
    for (double level : hla::kEnergyLevels) {
      hla::TableEntry e{"energy", level, level * 300, {}};
      e.choice = {{kBandCc[b], 1, 1, 1, 0}, 60, level * 300, true};
      s.entries.push_back(e);
    }
    t->strata.push_back(s);
  }
  return t;
}

StartFacts job() {
  StartFacts info;
  ChunkPlan c;
  c.kind = ChunkKind::Large;
  for (size_t i = 0; i < 1000; ++i) c.files.push_back(i);
  c.bytes = uint64_t(1e10), c.size_sd = 1e5;
  info.chunks = {c};
  info.bandwidth_bps = 100e6, info.rtt_s = 0.04, info.loss_pct = 0;
  info.bdp_bytes = 500000, info.tcp_buf_bytes = 6 << 20, info.max_channels = 32;
  return info;
}

// The simulated path: 40 Mbit/s per channel, up to what the cross traffic
// leaves; 20 W plus 2 W a channel.
struct Sim {
  double load = 0.05;
  double link = 100, per_channel = 40;
  double channel_w = 2;  // each channel's draw over the 20 W
  // Instead of that draw: each look's J/GB as a function of the setting,
  // times the next of these factors in turn (a look's scatter).
  std::function<double(const ChunkParams&)> jgb_at;
  std::vector<double> jgb_scatter = {1};
  size_t files_total = 0, files_left = 0;  // the chunk's files (0: not said)
  uint64_t done = 0;
  int interval = 0;
  Observation step(const Params& p, bool changed) {
    Observation o;
    int cc = p.chunks[0].cc;
    double mbps = std::min(link * (1 - load), per_channel * cc);
    if (p.rate_cap_bps > 0) mbps = std::min(mbps, p.rate_cap_bps / 1e6);  // the engine's receive-rate cap
    o.interval_s = 1, o.t_s = ++interval;
    o.throughput_bps = mbps * 1e6;
    o.bytes_interval = uint64_t(mbps * 1e6 / 8);
    done += o.bytes_interval;
    o.bytes_done = done, o.bytes_total = uint64_t(1e10);
    o.params = p;
    ChunkObservation c;
    c.params = p.chunks[0], c.bytes_total = o.bytes_total, c.bytes_done = done, c.throughput_bps = o.throughput_bps;
    c.files_total = files_total, c.files_done = files_total - files_left;
    o.chunks = {c};
    o.ext_load = load;
    o.joules = o.dynamic_joules = 20 + channel_w * cc;  // no idle draw in the simulation
    if (jgb_at)
      o.joules = o.dynamic_joules =
          jgb_at(p.chunks[0]) * jgb_scatter[size_t(interval - 1) % jgb_scatter.size()] * double(o.bytes_interval) / 1e9;
    o.energy_source = "test";
    o.settling = changed;
    return o;
  }
};

struct SimJob {
  std::unique_ptr<Tuner> tuner;
  Params p;
  Sim sim;
  bool changed = true;
  // Runs n intervals at the given load; returns cc at the end. `seen` is
  // shown each observation.
  int at(double load, int n, const std::function<void(const Observation&)>& seen = {}) {
    sim.load = load;
    for (int i = 0; i < n; ++i) {
      Observation o = sim.step(p, changed);
      changed = false;
      if (seen) seen(o);
      if (auto next = tuner->decide(o)) {
        changed = !(next->chunks == p.chunks);
        p = *next;
      }
    }
    return p.chunks[0].cc;
  }
};

// A job started by `policy` from the hand-made table.
// These follow the algorithms alone; exploration (explore_share) has its
// own tests below.
SimJob started(const std::string& policy, TunerOptions o, bool explore = false) {
  o.hla_table = table();
  if (!explore) o.explore_share = 0;
  SimJob r{make_tuner(policy, o)};
  r.p = r.tuner->init(job());
  return r;
}

TunerOptions floor_of(double mbps) {
  TunerOptions o;
  o.target_mbps = mbps;
  return o;
}

// How many of a tuner summary's events are named `name`.
int events_named(const nlohmann::json& summary, const std::string& name) {
  int n = 0;
  for (const auto& e : summary["events"]) n += e["event"] == name;
  return n;
}

}  // namespace

TEST(HlaTuner, ThroughputFollowsTheLoadBandsAndSwitchesAtMostThreeTimes) {
  SimJob r = started("hla-throughput", floor_of(50));
  // Light load first ("start with the light external load surface").
  EXPECT_EQ(r.p.chunks[0].cc, 2) << r.p.reason;
  EXPECT_NE(r.p.reason.find("P1/D1/L1"), std::string::npos) << r.p.reason;
  EXPECT_EQ(r.p.cores, 0) << "no kernel caps in this job: cores are left alone";
  EXPECT_EQ(r.at(0.05, 5), 2);
  // The load jumps to 0.6: under the floor, load up -> the band holding 0.6
  // (cc 8). The load leaves 40 Mbit/s, under the floor whatever the
  // channels: the table has nothing more, so channels are added one at a
  // time (the heuristic adjustment), not waiting for the switches to run out.
  EXPECT_GE(r.at(0.6, 6), 8);
  EXPECT_NE(r.p.reason.find("fine-tuning"), std::string::npos) << r.p.reason;
  // Down to 0.3: throughput up, load down -> the middle band.
  EXPECT_EQ(r.at(0.3, 6), 4);
  // Down to 0.05: the light band; the third switch.
  EXPECT_EQ(r.at(0.05, 6), 2);
  nlohmann::json s = r.tuner->summary();
  EXPECT_EQ(s["switches"], 3) << s.dump();
  // Up again: no fourth switch; the floor is missed, so fine-tuning adds
  // channels one at a time instead.
  int cc = r.at(0.6, 6);
  s = r.tuner->summary();
  EXPECT_EQ(s["switches"], 3) << s.dump();
  EXPECT_GT(s["fine_steps"].get<int>(), 0) << s.dump();
  EXPECT_GT(cc, 2);
  EXPECT_LE(cc, 2 + 6);
  EXPECT_EQ(s["start"], "table");
}

TEST(HlaTuner, OneNoisyIntervalIsNotALoadChange) {
  SimJob r = started("hla-throughput", floor_of(50));
  r.at(0.05, 4);
  EXPECT_EQ(r.at(0.7, 1), 2);  // one spike: the median of three does not move
  EXPECT_EQ(r.at(0.05, 4), 2);
  EXPECT_EQ(r.tuner->summary()["switches"], 0);
}

TEST(HlaTuner, EnergyMovesUpWhenTheProjectionRisesWithTheLoad) {
  SimJob r = started("hla-energy", {});
  // No ceiling: least energy, the level-1.0 energy entry of the light band.
  EXPECT_EQ(r.p.chunks[0].cc, 2) << r.p.reason;
  EXPECT_NE(r.p.reason.find("energy level 1"), std::string::npos) << r.p.reason;
  EXPECT_EQ(r.at(0.05, 5), 2);
  // Load 0.6: 40 instead of 80 Mbit/s at the same power: the projected
  // J/GB doubles and the load rose: the heavy band.
  EXPECT_EQ(r.at(0.6, 6), 8);
  // Load back down: the light band again.
  EXPECT_EQ(r.at(0.05, 6), 2);
  EXPECT_EQ(r.tuner->summary()["switches"], 2);
}

TEST(HlaTuner, EnergyCeilingPicksTheMostThroughputWithinIt) {
  // Entries at 300 x level J/GB: a ceiling of 400 allows levels 1.0, 1.1
  // and 1.25 (300, 330, 375); the most throughput of those is 1.25's.
  TunerOptions o;
  o.hla_table = table();
  o.energy_budget_j_per_gb = 400;
  auto t = make_tuner("hla-energy", o);
  Params p = t->init(job());
  EXPECT_NE(p.reason.find("energy level 1.25"), std::string::npos) << p.reason;
}

TEST(HlaTuner, WithoutATableItIsAColdStartOnTheHeuristic) {
  TunerOptions o;
  o.target_mbps = 50;
  auto t = make_tuner("hla-throughput", o);
  Params p = t->init(job());
  EXPECT_NE(p.reason.find("cold start"), std::string::npos) << p.reason;
  nlohmann::json s = t->summary();
  EXPECT_EQ(s["start"], "cold");
  EXPECT_EQ(s["heuristic"], "throughput-target");
  EXPECT_EQ(s["floor_mbps"], 50) << "the SLA is said also on a cold start";
  auto e = make_tuner("hla-energy", TunerOptions{});
  e->init(job());
  EXPECT_EQ(e->summary()["heuristic"], "min-energy");
  auto m = make_tuner("hla-throughput", TunerOptions{});
  m->init(job());
  EXPECT_EQ(m->summary()["heuristic"], "max-throughput");
}

namespace {

// An hla-throughput job on a path the table never saw (10 Gbit/s, 0.2 ms), started.
std::unique_ptr<Tuner> started_off_the_table(std::shared_ptr<const hla::ParamTable> t, Params& p) {
  TunerOptions o;
  o.hla_table = std::move(t);
  StartFacts info = job();
  info.bandwidth_bps = 10e9, info.rtt_s = 0.0002;
  auto tuner = make_tuner("hla-throughput", o);
  p = tuner->init(info);
  return tuner;
}

}  // namespace

TEST(HlaTuner, AChunkTheTableLacksAsksThePredictorOrSaysItUsesTheFormulas) {
  Params p;
  auto t = started_off_the_table(table(), p);  // no predictor in it
  EXPECT_NE(p.reason.find("no predictor to serve it (the table has no predictor): MinE"), std::string::npos) << p.reason;
  EXPECT_EQ(t->summary()["chunks"][0]["source"], "heuristic");
}

TEST(HlaTuner, MixedChunksAreScaledToTheChannelLimit) {
  TunerOptions o;
  o.hla_table = table();
  StartFacts info = job();
  info.chunks.push_back(info.chunks[0]);
  info.max_channels = 4;  // 2 + 2 at the light band: fits
  auto t = make_tuner("hla-throughput", o);
  Params p = t->init(info);
  EXPECT_EQ(p.total_channels(), 4) << p.reason;
  info.max_channels = 3;
  auto t2 = make_tuner("hla-throughput", o);
  p = t2->init(info);
  EXPECT_LE(p.total_channels(), 3) << p.reason;
  EXPECT_NE(p.reason.find("FastHLA Alg. 1"), std::string::npos) << p.reason;
}

TEST(HlaTuner, WhenAChunkFinishesTheOthersTakeOverItsShareOfTheFloor) {
  // The light band's throughput entries: cc 1 up to 50 Mbit/s (level 0.5),
  // cc 3 from 60 (level 0.6).
  auto t = std::make_shared<hla::ParamTable>(*table());
  for (hla::TableEntry& e : t->strata[0].entries)
    if (e.sla == "throughput") e.choice.knobs.cc = e.level < 0.6 ? 1 : 3;
  TunerOptions o = floor_of(60);
  o.hla_table = t;
  StartFacts info = job();
  info.chunks.push_back(info.chunks[0]);  // two chunks of equal bytes: 30 Mbit/s of the floor each
  auto tuner = make_tuner("hla-throughput", o);
  Params p = tuner->init(info);
  ASSERT_EQ(p.chunks.size(), 2u);
  EXPECT_EQ(p.chunks[0].cc, 1) << p.reason;
  EXPECT_EQ(p.chunks[1].cc, 1) << p.reason;
  auto interval = [&](int n, bool first_done) {
    Observation ob;
    ob.interval_s = 1, ob.t_s = n, ob.throughput_bps = 66e6, ob.bytes_interval = uint64_t(66e6 / 8);
    ob.bytes_total = uint64_t(2e10), ob.bytes_done = uint64_t(n * 66e6 / 8), ob.params = p, ob.ext_load = 0.05;
    ob.joules = ob.dynamic_joules = 20, ob.energy_source = "test";
    for (int i = 0; i < 2; ++i) {
      ChunkObservation c;
      c.params = p.chunks[size_t(i)], c.bytes_total = uint64_t(1e10);
      c.finished = i == 0 && first_done;
      c.bytes_done = c.finished ? c.bytes_total : uint64_t(1e9);
      ob.chunks.push_back(c);
    }
    return ob;
  };
  for (int n = 1; n <= 3; ++n) EXPECT_FALSE(tuner->decide(interval(n, false)).has_value()) << n;
  std::optional<Params> next = tuner->decide(interval(4, true));
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->chunks[1].cc, 3) << next->reason;  // all 60 Mbit/s now: level 0.6
  EXPECT_NE(next->reason.find("a chunk finished"), std::string::npos) << next->reason;
  EXPECT_EQ(tuner->summary()["switches"], 0);  // the same surfaces: not a switch
  EXPECT_FALSE(tuner->decide(interval(5, true)).has_value());  // once
}

TEST(HlaTuner, AStratumWithoutEnergyFiguresAnswersEnergyWithItsCheapestLevel) {
  hla::TableStratum s = table()->strata[0];
  s.entries.erase(std::remove_if(s.entries.begin(), s.entries.end(),
                                 [](const hla::TableEntry& e) { return e.sla == "energy"; }),
                  s.entries.end());
  bool met = true;
  const hla::TableEntry* e = hla::choose(s, "energy", 0, met);
  ASSERT_NE(e, nullptr);
  EXPECT_FALSE(met);
  EXPECT_EQ(e->sla, "throughput");
  EXPECT_DOUBLE_EQ(e->level, hla::kThroughputLevels.front());
  // A floor above every entry: the most throughput, and not met.
  e = hla::choose(s, "throughput", 1000, met);
  ASSERT_NE(e, nullptr);
  EXPECT_FALSE(met);
  EXPECT_DOUBLE_EQ(e->level, 1.0);
}

namespace {

// One band whose surfaces say 40 Mbit/s a channel (eq. 10's steps: cc k
// from 40 (k - 1) to 40 k Mbit/s), J/GB rising with the channels.
std::shared_ptr<const hla::ParamTable> steps_table() {
  auto t = std::make_shared<hla::ParamTable>(*table());
  t->strata.resize(1);
  hla::TableStratum& s = t->strata[0];
  s.load_lo = 0, s.load_hi = 1;
  s.entries.clear();
  for (int cc = 1; cc <= 16; ++cc) {
    hla::TableEntry e{"throughput", cc / 16.0, 40.0 * cc, {}};
    e.choice = {{cc, 1, 1, 1, 0}, 40.0 * cc, 100 + 10.0 * cc, true};
    s.entries.push_back(e);
    s.entries.push_back({"energy", (100 + 10.0 * cc) / 110, 100 + 10.0 * cc, e.choice});
  }
  return t;
}

SimJob on_steps(TunerOptions o, double per_channel) {
  o.hla_table = steps_table();
  o.explore_share = 0;
  StartFacts info = job();
  SimJob r{make_tuner("hla-throughput", o)};
  r.sim.link = 1000, r.sim.per_channel = per_channel;
  r.p = r.tuner->init(info);
  return r;
}

}  // namespace

TEST(HlaTuner, AFloorMissedWithFlatLoadIsCorrectedWithinTwoIntervals) {
  // The surfaces promise 40 Mbit/s a channel; this path gives 20. A floor of
  // 100: the table's answer is cc 3 (120 predicted, 60 measured). The load
  // stays flat, so Algorithm 2 alone would never move; the adjustment asks
  // the table again at the floor over what its predictions are worth here.
  SimJob r = on_steps(floor_of(100), 20);
  EXPECT_EQ(r.p.chunks[0].cc, 3) << r.p.reason;
  r.at(0.05, 1);  // the start's settling interval
  r.at(0.05, 1);  // measured: 60 Mbit/s, under the floor
  r.at(0.05, 1);  // the change settles
  Observation o = r.sim.step(r.p, false);
  EXPECT_GE(o.throughput_bps / 1e6, 100) << r.p.reason;
  EXPECT_LE(o.throughput_bps / 1e6, 100 * 1.3) << r.p.reason;
  EXPECT_EQ(r.tuner->summary()["switches"], 0);
  EXPECT_EQ(r.tuner->summary()["adjustments"], 1);
  // And it stays there.
  EXPECT_EQ(r.at(0.05, 8), r.p.chunks[0].cc);
  EXPECT_EQ(r.tuner->summary()["adjustments"], 1);
}

// Algorithm 2 judges T_avg, the throughput over the looks at these params,
// not one look: one dip to 93 Mbit/s between looks at 108 for a floor of
// 100 is no breach (the old code asked the table again on it); a fall that
// lasts is one.
TEST(HlaTuner, AFloorIsJudgedOnTheAverageOfTheLooksAtTheseParams) {
  SimJob r = on_steps(floor_of(100), 36);  // cc 3: 108 Mbit/s, in the band, no cap
  ASSERT_EQ(r.p.chunks[0].cc, 3) << r.p.reason;
  r.at(0.05, 4);
  ASSERT_EQ(r.p.rate_cap_bps, 0) << r.p.reason;
  ASSERT_EQ(r.tuner->summary()["adjustments"], 0) << r.p.reason;
  r.sim.per_channel = 31;  // one look at 93
  r.at(0.05, 1);
  EXPECT_EQ(r.tuner->summary()["adjustments"], 0) << r.p.reason;
  EXPECT_EQ(r.p.chunks[0].cc, 3) << r.p.reason;
  r.sim.per_channel = 36;
  r.at(0.05, 2);
  r.sim.per_channel = 31;  // a fall that lasts: the average goes under the floor
  r.at(0.05, 3);
  EXPECT_EQ(r.tuner->summary()["adjustments"], 1) << r.p.reason;
  EXPECT_GT(r.p.chunks[0].cc, 3) << r.p.reason;
}

TEST(HlaTuner, ThroughputFarAboveTheFloorIsTrimmed) {
  // This path gives 80 Mbit/s a channel where the surfaces say 40: cc 3 for
  // a floor of 100 moves 240. Least energy at T >= T_sla: the first look
  // over the band (throughput-target's: 1.10x) asks the table again for a
  // cheaper setting, cc 2 (160), and what that still carries over the floor
  // the cap holds, in the same decision (issue 54: two intervals over it
  // before the cap came were 1.3x the floor in floor-hla's job averages).
  SimJob r = on_steps(floor_of(100), 80);
  EXPECT_EQ(r.p.chunks[0].cc, 3) << r.p.reason;
  Observation first = r.sim.step(r.p, true);  // the start's settling look decides an overshoot too
  std::optional<Params> d = r.tuner->decide(first);
  ASSERT_TRUE(d);
  r.p = *d;
  EXPECT_EQ(r.p.chunks[0].cc, 2) << r.p.reason;
  EXPECT_NE(r.p.reason.find("(slack)"), std::string::npos) << r.p.reason;
  EXPECT_NEAR(r.p.rate_cap_bps, 103e6, 0.5e6) << r.p.reason;
  // Then nothing moves: never below the floor, no back and forth.
  int decisions = 0;
  for (int i = 0; i < 10; ++i) {
    Observation o = r.sim.step(r.p, false);
    EXPECT_GE(o.throughput_bps / 1e6, 100);
    if (std::optional<Params> next = r.tuner->decide(o)) r.p = *next, ++decisions;
  }
  EXPECT_EQ(decisions, 0) << r.p.reason;
  EXPECT_EQ(r.p.chunks[0].cc, 2);
}

// The floor as the job's average, in the tail too (issue 54: a long-tailed
// job's last intervals ran at 66 Mbit/s under a cap of 113 with the three
// channels the table gave; the paper's rules decide nothing in the tail).
// Under the floor there, where the cap does not bind: throughput-target's
// jump, on the chunk with the most bytes left. Fails on d47ecf8 (no
// decision in the tail under the floor).
TEST(HlaTuner, AFloorMissedInTheTailGetsChannelsAtOnce) {
  SimJob r = on_steps(floor_of(100), 80);
  Observation first = r.sim.step(r.p, true);
  if (std::optional<Params> d = r.tuner->decide(first)) r.p = *d;
  ASSERT_GT(r.p.rate_cap_bps, 0) << r.p.reason;
  const int before = r.p.total_channels();
  r.sim.per_channel = 30;  // the last, larger files: what a channel carries falls
  Observation o = r.sim.step(r.p, false);
  o.near_end = true;
  ASSERT_LT(o.throughput_bps / 1e6, 100);
  std::optional<Params> d = r.tuner->decide(o);
  ASSERT_TRUE(d) << "the tail under the floor decides";
  EXPECT_GT(d->total_channels(), before) << d->reason;
  EXPECT_NE(d->reason.find("in the tail"), std::string::npos) << d->reason;
  EXPECT_GE(d->rate_cap_bps, 100e6 * 1.03) << "the cap stays over the need";
  // The channels it gave carry the floor again.
  r.p = *d;
  Observation after = r.sim.step(r.p, true);
  EXPECT_GE(after.throughput_bps / 1e6, 100);
}

// Under a floor while capped, two looks in a row under the floor mean the
// path's share was lost (the cross traffic rose), not the cap's leave: the
// channels at least double and stay, the cap holding the rate. On
// hla-goals' html set the floor job held 50 Mbit/s on the table's 2
// channels under a cap of 51.5 and fell to 43-47 at every rise of the cross
// traffic, the cap "following" (raised over what nothing could use); once
// a correction had given it 10-16 channels no rise took it under. Here
// each channel's share falls from 80 to 48 Mbit/s: 96 under a cap of 103.
TEST(HlaTuner, AFloorMissedUnderACapDoublesItsChannels) {
  SimJob r = on_steps(floor_of(100), 80);
  Observation first = r.sim.step(r.p, true);
  if (std::optional<Params> d = r.tuner->decide(first)) r.p = *d;
  ASSERT_GT(r.p.rate_cap_bps, 0) << r.p.reason;
  r.changed = true;
  r.at(0.05, 4);
  const int before = r.p.total_channels();
  const double cap = r.p.rate_cap_bps;
  r.sim.per_channel = 48;
  int under = 0;
  r.at(0.05, 12, [&](const Observation& ob) { under += !ob.settling && ob.throughput_bps < 100e6; });
  EXPECT_LE(under, 2) << r.p.reason;
  EXPECT_GE(r.p.total_channels(), 2 * before) << r.p.reason;
  EXPECT_GE(r.p.rate_cap_bps, cap) << "the cap holds the rate";
  const nlohmann::json sum = r.tuner->summary();
  EXPECT_EQ(events_named(sum, "under the floor under a cap: channels added"), 1) << sum.dump();
  // One look under the floor is noise: nothing moves.
  SimJob once = on_steps(floor_of(100), 80);
  Observation f1 = once.sim.step(once.p, true);
  if (std::optional<Params> d = once.tuner->decide(f1)) once.p = *d;
  once.changed = true;
  once.at(0.05, 4);
  const Params held = once.p;
  once.sim.per_channel = 48;
  once.at(0.05, 1);
  once.sim.per_channel = 80;
  once.at(0.05, 4);
  EXPECT_EQ(once.p.total_channels(), held.total_channels()) << once.p.reason;
}

// Where the chunk's cc is at its files left, the flows come from p: on
// hla-goals' mixed set the rule fired on the large chunk, cc at its two
// files, and added nothing.
TEST(HlaTuner, AFloorMissedUnderACapOnAChunkAtItsFilesDoublesP) {
  SimJob r = on_steps(floor_of(100), 80);
  Observation first = r.sim.step(r.p, true);
  if (std::optional<Params> d = r.tuner->decide(first)) r.p = *d;
  ASSERT_GT(r.p.rate_cap_bps, 0) << r.p.reason;
  const ChunkParams was = r.p.chunks[0];
  r.sim.files_total = r.sim.files_left = size_t(was.cc);
  r.changed = true;
  r.at(0.05, 3);
  r.sim.per_channel = 48;
  r.at(0.05, 3);
  EXPECT_EQ(r.p.chunks[0].cc, was.cc) << r.p.reason;
  EXPECT_GE(r.p.chunks[0].cc * r.p.chunks[0].p, 2 * was.cc * was.p) << r.p.reason;
  EXPECT_NE(r.p.reason.find("and p 1 -> 2"), std::string::npos) << r.p.reason;
}


// band switch: the higher-load band's setting is taken only with as many
// connections (cc x p). On hla-goals' html set the band's 1x2x3 replaced a
// 7x1x4 that held 54.7 Mbit/s at load 0.59, and moved 27 against a floor
// of 50. Here the heavier bands answer cc 1 where the job holds its floor
// on more.
TEST(HlaTuner, ABandSwitchKeepsTheFlowsThatHoldAFloor) {
  auto t = std::make_shared<hla::ParamTable>(*table());
  for (size_t b = 1; b < t->strata.size(); ++b)
    for (hla::TableEntry& e : t->strata[b].entries) e.choice.knobs.cc = 1;
  TunerOptions o = floor_of(50);
  o.hla_table = t;
  o.explore_share = 0;
  SimJob r{make_tuner("hla-throughput", o)};
  r.p = r.tuner->init(job());
  ASSERT_EQ(r.p.chunks[0].cc, 2) << r.p.reason;
  r.at(0.05, 5);
  ASSERT_GT(r.p.rate_cap_bps, 0) << r.p.reason;
  r.sim.per_channel = 24;  // the load rises and the channels' share falls: 48 Mbit/s
  r.at(0.3, 1);
  r.sim.per_channel = 40;
  int under = 0;
  r.at(0.3, 6, [&](const Observation& ob) { under += !ob.settling && ob.throughput_bps < 50e6; });
  EXPECT_EQ(under, 0) << r.p.reason;
  const nlohmann::json s = r.tuner->summary();
  EXPECT_EQ(events_named(s, "higher-load surface"), 1) << s.dump();
  EXPECT_EQ(events_named(s, "higher-load surface: flows kept"), 1) << s.dump();
  EXPECT_GE(r.p.chunks[0].cc, 2) << r.p.reason;
  Observation after = r.sim.step(r.p, false);
  EXPECT_GE(after.throughput_bps / 1e6, 50) << r.p.reason;
}

// At the floor under a cap that binds, the channels the files left need
// are added before the rate falls (tune::LeftChannels, which
// throughput-target uses too): a look that was not capped showed the window
// a channel carries; the files left are ten times smaller, a round trip
// each, so each channel carries less. Before, hla-throughput kept the
// table's channels and a long-tailed set's later files ran at 78-98 Mbit/s
// of 110 under the cap (floor-hla).
TEST(HlaTuner, AtTheFloorUnderACapTheFilesLeftGetTheirChannels) {
  SimJob r = on_steps(floor_of(100), 80);
  auto with_files = [](Observation o, uint64_t files_left, double file_bytes) {
    o.bytes_total = o.bytes_done + uint64_t(double(files_left) * file_bytes);
    ChunkObservation& c = o.chunks[0];
    c.bytes_total = o.bytes_total, c.bytes_done = o.bytes_done;
    c.files_total = 10 + files_left, c.files_done = 10;
    return o;
  };
  Observation measured = with_files(r.sim.step(r.p, false), 100, 4e6);  // 4-MB files, no cap yet
  ASSERT_EQ(measured.params.rate_cap_bps, 0);
  if (std::optional<Params> d = r.tuner->decide(measured)) r.p = *d;
  ASSERT_GT(r.p.rate_cap_bps, 0) << "the overshoot is capped: " << r.p.reason;
  const int before = r.p.total_channels();
  Observation capped = with_files(r.sim.step(r.p, false), 40, 4e5);  // at the cap, the last 400-kB files left
  ASSERT_GE(capped.throughput_bps, 100e6);
  std::optional<Params> d = r.tuner->decide(capped);
  ASSERT_TRUE(d) << "the files left decide";
  EXPECT_GT(d->total_channels(), before) << d->reason;
  EXPECT_NE(d->reason.find("files left carry about"), std::string::npos) << d->reason;
  EXPECT_GE(d->rate_cap_bps, r.p.rate_cap_bps) << "the cap holds what they bring";
  // With files as large as those measured, nothing to add.
  SimJob same = on_steps(floor_of(100), 80);
  Observation m2 = with_files(same.sim.step(same.p, false), 100, 4e6);
  if (std::optional<Params> d2 = same.tuner->decide(m2)) same.p = *d2;
  std::optional<Params> none = same.tuner->decide(with_files(same.sim.step(same.p, false), 90, 4e6));
  EXPECT_TRUE(!none || none->total_channels() <= same.p.total_channels()) << none->reason;
}

TEST(HlaTuner, AJobStartingUnderHeavyLoadStartsOnTheHeavyBand) {
  // No load is known at the start: the light band (cc 2). The first load
  // measured (0.6) is the heavy band's: the job moves there at once, and it
  // is not one of the three switches.
  SimJob r = started("hla-throughput", floor_of(30));
  EXPECT_EQ(r.p.chunks[0].cc, 2) << r.p.reason;
  EXPECT_EQ(r.at(0.6, 2), 8) << r.p.reason;
  EXPECT_NE(r.p.reason.find("P1/D1/L3"), std::string::npos) << r.p.reason;
  EXPECT_EQ(r.tuner->summary()["switches"], 0);
  // hla-energy likewise.
  SimJob e = started("hla-energy", {});
  EXPECT_EQ(e.at(0.6, 2), 8) << e.p.reason;
}

namespace {
// hla-energy under a ceiling, on the steps table, on a 100 Mbit/s link at
// 40 Mbit/s a channel.
SimJob ceiling_on_steps(double j_per_gb) {
  TunerOptions o;
  o.energy_budget_j_per_gb = j_per_gb;
  o.hla_table = steps_table();
  SimJob r{make_tuner("hla-energy", o)};
  r.sim.link = 100, r.sim.per_channel = 40;
  r.p = r.tuner->init(job());
  return r;
}
}  // namespace

TEST(HlaTuner, AnEnergyCeilingPassedWithFlatLoadIsCorrected) {
  // A 100 Mbit/s link: past 3 channels more only cost power (20 W + 2 W a
  // channel), where the surfaces say J/GB grows by 10 a channel from 110.
  // A ceiling of 2500 J/GB: the table's most throughput within it is cc 16
  // (4400 J/GB here, as Algorithm 1 projects it); asked again at the
  // ceiling over what its predictions proved worth, cc 3 (2200) meets it.
  SimJob r = ceiling_on_steps(2500);
  EXPECT_EQ(r.p.chunks[0].cc, 16) << r.p.reason;
  int cc = r.at(0.05, 6);
  EXPECT_LE(cc, 4) << r.p.reason;
  EXPECT_GE(cc, 3) << r.p.reason;
  EXPECT_GE(r.tuner->summary()["adjustments"].get<int>(), 1);
  Observation last = r.sim.step(r.p, false);
  EXPECT_LE(*last.dynamic_joules / (double(last.bytes_interval) / 1e9), 2500);
  EXPECT_EQ(r.at(0.05, 8), cc) << "and it stays";
}

// The correction relaxes as it tightens (issue 55): a ceiling of 2500 J/GB
// passed on a 100 Mbit/s link is corrected to cc 3 or 4 (above); then the
// link carries ten times more, the projection falls far under the ceiling,
// and the table is asked again for more throughput within it. Before, the
// worth only grew more careful, and the job stayed on cc 3 to its end.
TEST(HlaTuner, TheCorrectionRelaxesWhenThePathGivesMoreAgain) {
  SimJob r = ceiling_on_steps(2500);
  const int tight = r.at(0.05, 6);
  ASSERT_LE(tight, 4) << r.p.reason;
  const int adjusted = r.tuner->summary()["adjustments"].get<int>();
  r.sim.link = 1000;  // 40 Mbit/s a channel, no longer held to 100 in all
  // (The change of level at one setting counts as the looks' scatter until
  // it leaves the last 12 looks: the ceiling is aimed under it until then.)
  const int relaxed = r.at(0.05, 18);
  EXPECT_GT(relaxed, tight) << r.p.reason;
  EXPECT_GT(r.tuner->summary()["adjustments"].get<int>(), adjusted) << r.p.reason;
  EXPECT_NE(r.p.reason.find("(slack)"), std::string::npos) << r.p.reason;
  // Within the ceiling still.
  Observation last = r.sim.step(r.p, false);
  EXPECT_LE(*last.dynamic_joules / (double(last.bytes_interval) / 1e9), 2500);
}

// A ceiling is a promise on the looks, not only on the job's mean (issue
// 55: at the ceiling itself half the looks were over it). On the steps
// table's path (40 Mbit/s and 100 + 10 cc J/GB a channel, as the surfaces
// say), with each look's J/GB scattered by -35%, +35%, -20%, +20% about
// that: under a ceiling of 200 the table's most throughput within it is cc
// 10 (200), whose looks reach 270. The job aims under the ceiling less 1.28
// of its looks' scatter, and at least fifteen of the last sixteen looks are
// within 5% of the ceiling, on no fewer channels than that asks for. (The
// old code settled on cc 5, 150 J/GB on average: 12 of 16 looks within.)
TEST(HlaTuner, ACeilingHoldsNineLooksInTenAgainstTheirScatter) {
  TunerOptions o;
  o.energy_budget_j_per_gb = 200;
  o.hla_table = steps_table();
  o.explore_share = 0;
  SimJob r{make_tuner("hla-energy", o)};
  r.sim.link = 1e6;  // 40 Mbit/s a channel, however many
  r.sim.jgb_at = [](const ChunkParams& c) { return 100 + 10.0 * c.cc; };
  r.sim.jgb_scatter = {0.65, 1.35, 0.8, 1.2};
  r.p = r.tuner->init(job());
  ASSERT_EQ(r.p.chunks[0].cc, 10) << r.p.reason;
  std::vector<double> looks;
  r.at(0.05, 40, [&](const Observation& ob) {
    if (!ob.settling) looks.push_back(*ob.dynamic_joules / (double(ob.bytes_interval) / 1e9));
  });
  const Params& p = r.p;
  const auto& t = r.tuner;
  ASSERT_GE(looks.size(), 16u);
  int within = 0;
  for (size_t i = looks.size() - 16; i < looks.size(); ++i) within += looks[i] <= 200 * 1.05;
  EXPECT_GE(within, 15) << "of the last 16 looks; at cc " << p.chunks[0].cc << ": " << p.reason;
  const double aimed = t->summary()["ceiling_aimed_j_per_gb"].get<double>();
  EXPECT_LT(aimed, 200 / 1.25) << "the aim is the ceiling less its looks' scatter";
  EXPECT_GT(aimed, 200 / (1 + 1.28)) << "the scatter is measured, not taken as a whole ceiling";
  // The aim (about 140 here) under the table's 10% margin: cc 2 (120, its
  // worst look 162), not the least the table has (cc 1).
  EXPECT_GE(p.chunks[0].cc, 2) << "not below what the scatter asks: " << p.reason;
}

// Issue 41: exploration within the SLA. The table's light band has measured
// cc 2 and cc 4 well (five visits each, 2% spread) and nothing with p or pp
// above 1.
namespace {

std::shared_ptr<const hla::ParamTable> measured_table() {
  auto t = std::make_shared<hla::ParamTable>(*table());
  for (hla::TableStratum& s : t->strata)
    for (int cc : {2, 4}) s.measured.push_back({{cc, 1, 1, 2, 0}, 5, 50, 0.5, 40.0 * cc, 0.8 * cc, 300});
  return t;
}

// Runs n intervals; returns the least throughput of the measured (not
// settling) intervals.
double run_intervals(SimJob& r, double load, int n) {
  r.sim.load = load;
  double least = 1e300;
  for (int i = 0; i < n; ++i) {
    Observation o = r.sim.step(r.p, r.changed);
    if (!o.settling) least = std::min(least, o.throughput_bps / 1e6);
    r.changed = false;
    if (auto next = r.tuner->decide(o)) {
      r.changed = !(next->chunks == r.p.chunks);
      r.p = *next;
      if (r.changed) {
        EXPECT_TRUE(next->reason.find("explore") != std::string::npos || next->reason.find("back") != std::string::npos)
            << next->reason;
      }
    }
  }
  return least;
}

}  // namespace

TEST(HlaTuner, ExplorationSpendsAtMostItsShareNeverMissesTheFloorAndSaysSo) {
  TunerOptions o = floor_of(30);
  o.hla_table = measured_table();
  SimJob r{make_tuner("hla-throughput", o)};
  r.p = r.tuner->init(job());
  ASSERT_EQ(r.p.chunks[0].cc, 2) << r.p.reason;  // 80 Mbit/s here: well above the floor
  double least = run_intervals(r, 0.05, 200);
  nlohmann::json s = r.tuner->summary();
  EXPECT_GE(s["explorations"].get<int>(), 3) << s.dump();
  EXPECT_LE(s["explored_intervals"].get<double>(), 0.1 * s["intervals"].get<double>()) << s.dump();
  EXPECT_GE(least, 30) << "an exploration under a floor never takes fewer channels";
  // What was tried: settings the stratum lacks (p or pp doubled), never the
  // well-known cc 4, and never fewer channels. In this path p and pp change
  // nothing, so each goes back. A trial counts as a visit of its own when
  // UCB1 picks the next: the two settings never measured are tried before
  // either is tried again (with the table's counts alone, every exploration
  // picked the first of them, its count never moving).
  int explored = 0;
  std::set<std::tuple<int, int, int>> first_two;
  for (const auto& e : s["events"]) {
    if (e["event"] != "explore") continue;
    ++explored;
    EXPECT_EQ(e["visits"].get<int>(), (explored - 1) / 2) << e.dump();  // the two in turn
    if (explored <= 2) first_two.insert({e["cc"].get<int>(), e["p"].get<int>(), e["pp"].get<int>()});
    EXPECT_TRUE(e["p"].get<int>() > 1 || e["pp"].get<int>() > 1) << e.dump();
    EXPECT_GE(e["cc"].get<int>(), 2) << e.dump();
  }
  EXPECT_EQ(first_two.size(), 2u) << s.dump();
  EXPECT_EQ(explored, s["explorations"].get<int>());
  EXPECT_EQ(s["explorations_kept"], 0) << s.dump();
  EXPECT_EQ(r.p.chunks[0].cc, 2);

  // A floor met by less than the margin: no exploration at all.
  TunerOptions tight = floor_of(75);
  tight.hla_table = measured_table();
  SimJob t{make_tuner("hla-throughput", tight)};
  t.p = t.tuner->init(job());
  ASSERT_EQ(t.p.chunks[0].cc, 2) << t.p.reason;
  run_intervals(t, 0.05, 200);
  EXPECT_EQ(t.tuner->summary()["explorations"], 0) << t.tuner->summary().dump();

  // explore_share 0: none either.
  TunerOptions off = floor_of(30);
  off.hla_table = measured_table();
  off.explore_share = 0;
  SimJob z{make_tuner("hla-throughput", off)};
  z.p = z.tuner->init(job());
  run_intervals(z, 0.05, 200);
  EXPECT_EQ(z.tuner->summary()["explorations"], 0);
}

// The budget for trials is kept per stratum across jobs (issue 55): a
// stratum whose history held its settings 600 s and tried nothing has
// budget for a trial at a job's first steady looks (the job's own 10%
// allowed nothing before its 20th interval, and no bench job explored);
// one whose trials already took 70 s of its 600 has none for a job of 30
// intervals. The trial's rows say so (hla::kExploreTag), which is how the
// next analysis counts them (Hla.TrialsAreCountedPerStratum).
TEST(HlaTuner, TheExplorationBudgetIsTheStratumsAcrossJobs) {
  auto with_history = [](double seconds, double explored_s) {
    auto t = std::make_shared<hla::ParamTable>(*measured_table());
    for (hla::TableStratum& st : t->strata) st.seconds = seconds, st.explored_s = explored_s;
    TunerOptions o = floor_of(30);
    o.hla_table = t;
    SimJob r{make_tuner("hla-throughput", o)};
    r.p = r.tuner->init(job());
    return r;
  };
  SimJob fresh = with_history(600, 0);
  run_intervals(fresh, 0.05, 8);
  nlohmann::json s = fresh.tuner->summary();
  EXPECT_GE(s["explorations"].get<int>(), 1) << s.dump();
  bool tagged = false;
  for (const auto& e : s["events"]) tagged = tagged || e["event"] == "explore";
  EXPECT_TRUE(tagged) << s.dump();
  SimJob spent = with_history(600, 70);
  run_intervals(spent, 0.05, 30);
  EXPECT_EQ(spent.tuner->summary()["explorations"], 0) << spent.tuner->summary().dump();
}

TEST(HlaTuner, AnExploredSettingThatDoesBetterIsKept) {
  // Most throughput: the table says cc 2 (80 Mbit/s), this path gives 40
  // Mbit/s a channel up to 1000. cc 8 was never measured: explored, kept.
  TunerOptions o;
  auto t = std::make_shared<hla::ParamTable>(*measured_table());
  for (hla::TableStratum& st : t->strata) st.measured.pop_back();  // cc 4 not measured either
  o.hla_table = t;
  SimJob r{make_tuner("hla-throughput", o)};
  r.sim.link = 1000;
  r.p = r.tuner->init(job());
  ASSERT_EQ(r.p.chunks[0].cc, 2) << r.p.reason;
  run_intervals(r, 0.05, 60);
  nlohmann::json s = r.tuner->summary();
  EXPECT_GE(s["explorations_kept"].get<int>(), 1) << s.dump();
  EXPECT_GE(r.p.chunks[0].cc, 4) << r.p.reason;
  EXPECT_LE(s["explored_intervals"].get<double>(), 0.1 * s["intervals"].get<double>()) << s.dump();
}

// A trial is judged on the mean of its looks, past their scatter (issue
// 55): on the bench's path one 0.5-s look scatters by 9-23%, and a single
// look against +10% kept noise. Here cc 4 is tried from cc 2 (80 Mbit/s,
// flat): looks of 110, 82 and 80 are +13% on average but scatter by 12%
// of the reference as a standard error: back (the old rule kept it on its
// first look, +37%); 100, 100 and 100 are +25% with no scatter: kept.
namespace {

// Steps until a trial begins (its params' reason says so); returns
// whether one did.
bool until_a_trial(SimJob& r, int most) {
  for (int i = 0; i < most; ++i) {
    Observation o = r.sim.step(r.p, r.changed);
    r.changed = false;
    if (auto next = r.tuner->decide(o)) {
      r.changed = !(next->chunks == r.p.chunks);
      r.p = *next;
      if (r.p.reason.find(hla::kExploreTag) != std::string::npos) return true;
    }
  }
  return false;
}

// One look at the params in use that moved `mbps`.
std::optional<Params> look(SimJob& r, double mbps, bool settling) {
  Observation o = r.sim.step(r.p, settling);
  o.throughput_bps = mbps * 1e6, o.bytes_interval = uint64_t(mbps * 1e6 / 8);
  o.chunks[0].throughput_bps = o.throughput_bps;
  return r.tuner->decide(o);
}

// Most throughput from a table whose strata never measured cc 4 and held
// their settings `seconds` (the trials' budget is 10% of that and the job's).
TunerOptions most_throughput_cc4_unknown_options(double seconds = 600) {
  TunerOptions o;
  auto t = std::make_shared<hla::ParamTable>(*measured_table());
  for (hla::TableStratum& st : t->strata) st.measured.pop_back(), st.seconds = seconds;
  o.hla_table = t;
  return o;
}

SimJob most_throughput_with_cc4_unknown(double seconds = 600) {
  SimJob r{make_tuner("hla-throughput", most_throughput_cc4_unknown_options(seconds))};
  r.sim.link = 1000;
  r.p = r.tuner->init(job());
  return r;
}

}  // namespace

TEST(HlaTuner, ATrialIsJudgedOnTheMeanOfItsLooksAgainstTheirScatter) {
  for (bool steady : {false, true}) {
    SimJob r = most_throughput_with_cc4_unknown();
    ASSERT_EQ(r.p.chunks[0].cc, 2) << r.p.reason;
    ASSERT_TRUE(until_a_trial(r, 20)) << r.tuner->summary().dump();
    ASSERT_EQ(r.p.chunks[0].cc, 4) << r.p.reason;
    EXPECT_FALSE(look(r, 80, true)) << "the settling look judges nothing";
    const std::vector<double> looks = steady ? std::vector<double>{100, 100, 100} : std::vector<double>{110, 82, 80};
    std::optional<Params> end;
    for (size_t i = 0; i < looks.size(); ++i) {
      end = look(r, looks[i], false);
      if (i + 1 < looks.size()) {
        EXPECT_FALSE(end) << "judged after " << i + 1 << " looks: " << (end ? end->reason : "");
      }
    }
    ASSERT_TRUE(end) << r.tuner->summary().dump();
    nlohmann::json s = r.tuner->summary();
    const nlohmann::json& judged = s["events"].back();
    EXPECT_EQ(judged["looks"], 3) << judged.dump();
    if (steady) {
      EXPECT_EQ(judged["event"], "explored: kept") << judged.dump();
      EXPECT_EQ(end->chunks[0].cc, 4) << end->reason;
      EXPECT_EQ(end->reason.find(hla::kExploreTag), std::string::npos) << "a kept setting's rows are not a trial's";
    } else {
      EXPECT_EQ(judged["event"], "explored: back") << judged.dump();
      EXPECT_GT(judged["needed"].get<double>(), 0.2) << judged.dump();
      EXPECT_EQ(end->chunks[0].cc, 2) << end->reason;
    }
  }
}

// A trial across a change in external load says what the load did: it ends
// at once with no verdict (the trial setting counts no visit) and the
// setting before comes back.
TEST(HlaTuner, ATrialAcrossALoadChangeEndsWithNoVerdict) {
  SimJob r = most_throughput_with_cc4_unknown();
  ASSERT_TRUE(until_a_trial(r, 20)) << r.tuner->summary().dump();
  ASSERT_EQ(r.p.chunks[0].cc, 4) << r.p.reason;
  EXPECT_FALSE(look(r, 160, true));
  r.sim.load = 0.5;  // the cross traffic rises under the trial
  std::optional<Params> end = look(r, 100, false);
  ASSERT_TRUE(end) << "the load moved by 0.45: no more looks";
  EXPECT_EQ(end->chunks[0].cc, 2) << end->reason;
  EXPECT_NE(end->reason.find("no verdict"), std::string::npos) << end->reason;
  nlohmann::json s = r.tuner->summary();
  EXPECT_EQ(s["events"].back()["event"], "explored: load moved") << s.dump();
  EXPECT_EQ(s["explorations_kept"], 0) << s.dump();
}

// A trial's first looks that climb are its connections growing their
// windows, not its setting (issue 55): on hla-goals' html set MinE's 1x1x8
// tried from 4x1x4 moved 61, 88 and then 112 Mbit/s, and was judged on the
// first two. Here cc 4 tried from cc 2 (80 Mbit/s) climbs 70, 100, 130 and
// holds 130: judged on 130, 130, 130 (+62%), kept. The old rule judged 70,
// 100 and 130 (+25% against a standard error of 22%): back.
TEST(HlaTuner, ATrialIsJudgedOnceItsThroughputStopsClimbing) {
  SimJob r = most_throughput_with_cc4_unknown();
  ASSERT_EQ(r.p.chunks[0].cc, 2) << r.p.reason;
  ASSERT_TRUE(until_a_trial(r, 20)) << r.tuner->summary().dump();
  ASSERT_EQ(r.p.chunks[0].cc, 4) << r.p.reason;
  EXPECT_FALSE(look(r, 50, true)) << "the settling look judges nothing";
  std::optional<Params> end;
  const std::vector<double> looks = {70, 100, 130, 130, 130};
  for (size_t i = 0; i < looks.size() && !end; ++i) {
    end = look(r, looks[i], false);
    if (end) {
      EXPECT_EQ(i + 1, looks.size()) << "judged after " << i + 1 << " looks: " << end->reason;
    }
  }
  ASSERT_TRUE(end) << r.tuner->summary().dump();
  const nlohmann::json judged = r.tuner->summary()["events"].back();
  EXPECT_EQ(judged["event"], "explored: kept") << judged.dump();
  EXPECT_EQ(judged["ramp_looks"], 2) << judged.dump();
  EXPECT_NEAR(judged["mbps"].get<double>(), 130, 1e-6) << judged.dump();
  EXPECT_EQ(end->chunks[0].cc, 4) << end->reason;
}

// A job's first looks read cheaper than the same setting later, so a long
// job's first trial waits for its sixth interval; a job that would have
// no room for a trial by then does not wait (the learning bench's jobs
// last 3-10 intervals).
TEST(HlaTuner, ALongJobsFirstTrialWaitsForItsSixthInterval) {
  auto first_trial = [](bool short_job) {
    SimJob r = most_throughput_with_cc4_unknown();
    for (int i = 0; i < 20; ++i) {
      Observation o = r.sim.step(r.p, r.changed);
      r.changed = false;
      if (short_job) o.bytes_total = o.chunks[0].bytes_total = o.bytes_done + 6 * o.bytes_interval;
      if (auto next = r.tuner->decide(o)) {
        r.changed = !(next->chunks == r.p.chunks);
        r.p = *next;
        if (r.p.reason.find(hla::kExploreTag) != std::string::npos) return i + 1;
      }
    }
    return 0;
  };
  EXPECT_EQ(first_trial(false), 6);  // HlaTuner::kExploreWarm
  EXPECT_EQ(first_trial(true), 3) << "six looks left at the third: no room to wait";
}

// A trial is judged against up to six looks at the setting before it, not
// Algorithm 2's three (issue 55): of three, one often held the flow
// monitor's load and was left out, and two scattered so that a trial that
// gained 41% was asked for 47%. Here the looks before scatter 80, 80, 140
// in turn; cc 4 moves 135: +30-35% against a need of 25-28% over five or
// six, kept (over three, 40%: back).
TEST(HlaTuner, ATrialIsJudgedAgainstSixLooksBeforeIt) {
  // 33 s of history: a trial of 4 s fits 10% once the job has held 7 s.
  SimJob r = most_throughput_with_cc4_unknown(33);
  ASSERT_EQ(r.p.chunks[0].cc, 2) << r.p.reason;
  bool trial = false;
  for (int i = 0; i < 30 && !trial; ++i)
    if (std::optional<Params> next = look(r, i % 3 == 2 ? 140 : 80, i == 0)) {
      r.p = *next;
      trial = r.p.reason.find(hla::kExploreTag) != std::string::npos;
    }
  ASSERT_TRUE(trial) << r.tuner->summary().dump();
  ASSERT_EQ(r.p.chunks[0].cc, 4) << r.p.reason;
  EXPECT_FALSE(look(r, 135, true));
  std::optional<Params> end;
  for (int i = 0; i < 3 && !end; ++i) end = look(r, 135, false);
  ASSERT_TRUE(end) << r.tuner->summary().dump();
  const nlohmann::json judged = r.tuner->summary()["events"].back();
  EXPECT_EQ(judged["event"], "explored: kept") << judged.dump();
  EXPECT_GE(judged["ref_mbps"].get<double>(), 99) << judged.dump();
  EXPECT_LE(judged["ref_mbps"].get<double>(), 105) << judged.dump();
  EXPECT_LT(judged["needed"].get<double>(), 0.3) << judged.dump();
}

// A trial across a chunk's end measured another mix of bytes (issue 55):
// on hla-goals' mixed set a trial on the large files read -33% because
// the small files ran out under it. It ends with no verdict, the setting
// before comes back, and no visit is counted.
namespace {
// A look at a job of two chunks of 10 GB at 40 Mbit/s each: the first with
// first_left bytes left (finished at 0), the second with 9 GB.
Observation two_chunks_look(const Params& p, int n, uint64_t first_left, bool settling) {
  Observation ob;
  ob.interval_s = 1, ob.t_s = n, ob.throughput_bps = 80e6, ob.bytes_interval = uint64_t(80e6 / 8);
  ob.bytes_total = uint64_t(2e10), ob.bytes_done = uint64_t(n * 80e6 / 8), ob.params = p, ob.ext_load = 0.05;
  ob.joules = ob.dynamic_joules = 20, ob.energy_source = "test", ob.settling = settling;
  for (int i = 0; i < 2; ++i) {
    ChunkObservation c;
    c.params = p.chunks[size_t(i)], c.bytes_total = uint64_t(1e10), c.throughput_bps = 40e6;
    c.bytes_done = c.bytes_total - (i == 0 ? first_left : uint64_t(9e9));
    c.finished = i == 0 && first_left == 0;
    ob.chunks.push_back(c);
  }
  return ob;
}

// hla-throughput started on two chunks like job()'s, on the table of
// most_throughput_cc4_unknown_options().
std::pair<std::unique_ptr<Tuner>, Params> two_chunks_started() {
  auto tuner = make_tuner("hla-throughput", most_throughput_cc4_unknown_options());
  StartFacts info = job();
  info.chunks.push_back(info.chunks[0]);
  Params p = tuner->init(info);
  return {std::move(tuner), std::move(p)};
}
}  // namespace

TEST(HlaTuner, ATrialAcrossAChunksEndHasNoVerdict) {
  auto [tuner, p] = two_chunks_started();
  ASSERT_EQ(p.chunks.size(), 2u);
  auto interval = [&](int n, bool first_done, bool settling) {
    return two_chunks_look(p, n, first_done ? 0 : uint64_t(1e9), settling);  // the second has the most left
  };
  const Params before = p;
  int n = 0;
  bool trial = false;
  while (!trial && ++n < 30)
    if (std::optional<Params> next = tuner->decide(interval(n, false, n == 1))) {
      p = *next;
      trial = p.reason.find(hla::kExploreTag) != std::string::npos;
    }
  ASSERT_TRUE(trial) << tuner->summary().dump();
  ASSERT_EQ(p.chunks[1].cc, 4) << p.reason;
  EXPECT_FALSE(tuner->decide(interval(++n, false, true))) << "the settling look judges nothing";
  EXPECT_FALSE(tuner->decide(interval(++n, false, false))) << "one look of three";
  std::optional<Params> end = tuner->decide(interval(++n, true, false));
  ASSERT_TRUE(end) << "the first chunk finished under the trial: " << tuner->summary().dump();
  EXPECT_EQ(end->chunks[1].cc, before.chunks[1].cc) << end->reason;
  EXPECT_NE(end->reason.find("no verdict"), std::string::npos) << end->reason;
  const nlohmann::json s = tuner->summary();
  EXPECT_EQ(s["events"].back()["event"], "explored: a chunk finished") << s.dump();
  EXPECT_EQ(s["explorations_kept"], 0) << s.dump();
}

// A trial never doubles cc past the files the chunk has left: with two
// files left, cc 4 moves the same two files at once as cc 2 (only p opens
// more connections to them). On hla-goals' mixed set the large chunk's
// trials doubled cc past its two files. Here the table's cc 2 has the
// unmeasured cc 4 beside it, UCB1's first pick before; with two files
// left, p doubled is tried instead.
TEST(HlaTuner, ATrialDoesNotDoubleCcPastTheFilesLeft) {
  for (size_t left : {size_t(2), size_t(900)}) {
    SimJob r = most_throughput_with_cc4_unknown();
    r.sim.files_total = 1000, r.sim.files_left = left;
    ASSERT_EQ(r.p.chunks[0].cc, 2) << r.p.reason;
    nlohmann::json first;
    for (int n = 0; n < 30 && first.is_null(); ++n) {
      r.at(0.05, 1);
      const nlohmann::json sum = r.tuner->summary();
      for (const auto& e : sum["events"])
        if (e["event"] == "explore") first = e;
    }
    ASSERT_FALSE(first.is_null()) << r.tuner->summary().dump();
    if (left == 2) {
      EXPECT_EQ(first["cc"], 2) << first.dump();
      EXPECT_EQ(first["p"], 2) << first.dump();
    } else {
      EXPECT_EQ(first["cc"], 4) << "with files to spare cc is a neighbour still: " << first.dump();
    }
  }
}

// A trial waits while another chunk will finish within it (the end of a
// chunk leaves a trial across it with no verdict: on hla-goals' mixed set
// every trial on the large files was voided so). Here the first chunk has
// 10 MB left at 40 Mbit/s (2 s, under a trial's 5 looks of 1 s): nothing
// is tried until it has finished; then the second chunk's trial begins.
TEST(HlaTuner, ATrialWaitsForAChunkAboutToFinish) {
  auto [tuner, p] = two_chunks_started();
  ASSERT_EQ(p.chunks.size(), 2u);
  uint64_t first_left = uint64_t(1e7);
  auto interval = [&](int n, bool settling) { return two_chunks_look(p, n, first_left, settling); };
  const int finished_at = 20;  // the first chunk is held at 10 MB left until then (a slow tail)
  int n = 0, tried_at = 0;
  while (!tried_at && ++n < 40) {
    if (n == finished_at) first_left = 0;
    if (std::optional<Params> next = tuner->decide(interval(n, n == 1 || n == finished_at))) {
      if (next->reason.find(hla::kExploreTag) != std::string::npos) tried_at = n;
      p = *next;
    }
  }
  ASSERT_GT(tried_at, 0) << tuner->summary().dump();
  EXPECT_GT(tried_at, finished_at) << "no trial while the first chunk could finish under it: "
                                   << tuner->summary().dump();
}

// The look in which the flow monitor loaded its BPF programs (about 60 ms
// of CPU, 2 s into an xferctl job) carries no setting's energy (issue 55):
// in the bench it read a median 1.49x the looks beside it and was the
// first judged look of every trial begun at the third interval. Here MinE's
// cc 1 is tried against the table's cc 8 and draws a third of its power;
// one of its looks holds the load at ten times a look's energy. Left out,
// the trial is kept; taken in, its scatter sent it back.
namespace {
// The hand-made table with every least-energy answer at cc 8, which each
// band measured (five visits at 95 Mbit/s, j_per_gb), and `seconds` of
// history per band (the exploration budget).
std::shared_ptr<hla::ParamTable> energy_at_cc8(double seconds, double j_per_gb) {
  auto t = std::make_shared<hla::ParamTable>(*table());
  for (hla::TableStratum& st : t->strata) {
    st.seconds = seconds;
    for (hla::TableEntry& e : st.entries)
      if (e.sla == "energy") e.choice.knobs.cc = 8;
    st.measured.push_back({{8, 1, 1, 2, 0}, 5, 50, 0.5, 95, 1, j_per_gb});
  }
  return t;
}
}  // namespace

TEST(HlaTuner, TheFlowMonitorsLoadIsNoSettingsEnergy) {
  auto t = energy_at_cc8(40, 8400);
  TunerOptions o;
  o.hla_table = t;
  SimJob r{make_tuner("hla-energy", o)};
  r.sim.per_channel = 100, r.sim.channel_w = 10;
  r.p = r.tuner->init(job());
  ASSERT_EQ(r.p.chunks[0].cc, 8) << r.p.reason;
  ASSERT_TRUE(until_a_trial(r, 20)) << r.tuner->summary().dump();
  ASSERT_EQ(r.p.chunks[0].cc, 1) << r.p.reason;
  EXPECT_FALSE(r.tuner->decide(r.sim.step(r.p, true)));  // settling
  Observation loaded = r.sim.step(r.p, false);
  loaded.joules = loaded.dynamic_joules = *loaded.dynamic_joules * 10;
  loaded.one_off_cpu_s = 0.06;
  EXPECT_FALSE(r.tuner->decide(loaded));
  std::optional<Params> end;
  for (int i = 0; i < 2 && !end; ++i) end = r.tuner->decide(r.sim.step(r.p, false));
  ASSERT_TRUE(end) << r.tuner->summary().dump();
  const nlohmann::json judged = r.tuner->summary()["events"].back();
  EXPECT_EQ(judged["event"], "explored: kept") << judged.dump();
  EXPECT_EQ(end->chunks[0].cc, 1) << end->reason;
}

// hla-energy's first trial is the setting its formulas give (issue 55):
// the default collect sweeps around 8x1x4 and never held MinE's 1x1x8, so
// the table's least was dearer than min-energy's (hla-goals-b9d4751:
// 1.46x). Here the table says cc 8; MinE gives one channel to a large-file
// chunk, not a neighbour of cc 8 (halving gives 4); each channel draws 10 W
// and one carries what the load leaves. Tried first, kept: a third of the
// J/GB. A stratum that knows the setting well does not try it.
TEST(HlaTuner, HlaEnergyTriesItsFormulasSettingFirstAndKeepsItWhenCheaper) {
  auto with_measured = [](bool known) {
    auto t = energy_at_cc8(40, 8400);  // budget for a trial of 4 s at once, a second after 40 s more
    for (hla::TableStratum& st : t->strata) {
      if (known) st.measured.push_back({{1, 1, 1, 1, 0}, 5, 50, 0.5, 95, 1, 2500});
    }
    TunerOptions o;
    o.hla_table = t;
    SimJob r{make_tuner("hla-energy", o)};
    r.sim.per_channel = 100, r.sim.channel_w = 10;
    r.p = r.tuner->init(job());
    return r;
  };
  SimJob r = with_measured(false);
  ASSERT_EQ(r.p.chunks[0].cc, 8) << r.p.reason;
  r.at(0.05, 30);
  nlohmann::json s = r.tuner->summary();
  ASSERT_EQ(s["formula_arm"]["chunks"], nlohmann::json::array({"1x1x1"})) << s.dump();
  nlohmann::json first;
  for (const auto& e : s["events"])
    if (e["event"] == "explore") {
      first = e;
      break;
    }
  ASSERT_FALSE(first.is_null()) << s.dump();
  EXPECT_EQ(first["arm"], "formula") << first.dump();
  EXPECT_EQ(first["cc"], 1) << first.dump();
  EXPECT_GE(s["explorations_kept"].get<int>(), 1) << s.dump();
  EXPECT_EQ(r.p.chunks[0].cc, 1) << r.p.reason;
  // The load rises and falls: each band is a stratum of its own (its own
  // trial), and back on the light one the setting that won there is taken
  // at once, not tried again.
  r.at(0.6, 30);
  r.at(0.05, 30);
  s = r.tuner->summary();
  int formula_trials = 0, taken_again = 0, switches = 0;
  for (const auto& e : s["events"]) {
    if (e["event"] == "explore" && e["arm"] == "formula") ++formula_trials;
    if (e["event"] == "formula: taken again") ++taken_again;
    if (e["event"] == "higher-load surface" || e["event"] == "lower-load surface") ++switches;
  }
  ASSERT_GE(switches, 2) << s.dump();
  EXPECT_LE(formula_trials, 2) << s.dump();
  EXPECT_GE(taken_again, 1) << s.dump();
  EXPECT_EQ(r.p.chunks[0].cc, 1) << r.p.reason;

  SimJob known = with_measured(true);
  known.at(0.05, 30);
  const nlohmann::json ks = known.tuner->summary();
  for (const auto& e : ks["events"])
    if (e["event"] == "explore") {
      EXPECT_EQ(e["arm"], "neighbour") << e.dump();
    }
}

// A setting a later trial kept on a stratum stays: the formula's setting,
// which won there first, is taken again only when the job comes back to
// the stratum after a band switch. (Before, the next exploration took it
// back over the neighbour that had beaten it.)
TEST(HlaTuner, ANeighbourKeptAfterTheFormulasSettingIsNotUndone) {
  auto t = energy_at_cc8(400, 200);  // budget for several trials
  TunerOptions o;
  o.hla_table = t;
  SimJob r{make_tuner("hla-energy", o)};
  r.sim.link = 1e6, r.sim.per_channel = 40;
  // 1x1x1 (MinE's) costs half of 8x1x1; 2x1x1 less again.
  r.sim.jgb_at = [](const ChunkParams& c) { return c.cc == 1 ? 100.0 : c.cc == 2 ? 60.0 : 200.0; };
  r.p = r.tuner->init(job());
  ASSERT_EQ(r.p.chunks[0].cc, 8) << r.p.reason;
  r.at(0.05, 40);
  nlohmann::json s = r.tuner->summary();
  int formula_kept = 0, neighbour_kept = 0;
  for (const auto& e : s["events"]) {
    if (e["event"] == "explored: kept") ++(e["arm"] == "formula" ? formula_kept : neighbour_kept);
    EXPECT_NE(e["event"], "formula: taken again") << "no band switch came: " << s.dump();
  }
  ASSERT_EQ(formula_kept, 1) << s.dump();
  ASSERT_GE(neighbour_kept, 1) << s.dump();
  EXPECT_EQ(r.p.chunks[0].cc, 2) << r.p.reason;
}

namespace {
// A ceiling of 100 J/GB the table cannot meet: its strata measured only p
// = 2 and predict 50-82 J/GB, while on this path p = 2 costs 1.5x and J/GB
// is 70 + 5 cc (cc 16 at p 2: 225; cc 1 at p 2: 112.5). MinE's setting is
// 1x1x1 (75 J/GB here, or 150 with `dear_formula`: p 1 costs 2x).
SimJob ceiling_out_of_the_tables_reach(double formula_factor = 1.0, bool two_bands = false) {
  auto t = std::make_shared<hla::ParamTable>(*steps_table());
  for (hla::TableEntry& e : t->strata[0].entries) {
    const int cc = e.choice.knobs.cc;
    e.choice.knobs.p = 2;
    e.choice.j_per_gb = 50 + 2.0 * cc;
    if (e.sla == "energy") e.bound = e.choice.j_per_gb;
  }
  if (two_bands) {  // the same answers on a light (0-0.3) and a heavy (0.3-1) band
    t->strata[0].load_hi = 0.3;
    hla::TableStratum heavy = t->strata[0];
    heavy.id = "P1/D1/L2", heavy.load_lo = 0.3, heavy.load_hi = 1;
    t->strata.push_back(heavy);
  }
  TunerOptions o;
  o.energy_budget_j_per_gb = 100;
  o.hla_table = t;
  o.explore_share = 0;  // the rescue is not an exploration: it spends no budget
  SimJob r{make_tuner("hla-energy", o)};
  r.sim.link = 100, r.sim.per_channel = 40;
  // MinE's setting (p 1) costs formula_factor times the table's cc at p 1.
  r.sim.jgb_at = [formula_factor](const ChunkParams& c) {
    return (70 + 5.0 * c.cc) * (c.p >= 2 ? 1.5 : formula_factor);
  };
  r.p = r.tuner->init(job());
  return r;
}
}  // namespace

// A ceiling missed where the table has nothing cheaper tries MinE's whole
// setting, judged on J/GB: on hla-goals' html set the table's answers cost
// 115-118 J/GB under a ceiling of 100 and fine-tuning, a channel at a time,
// never moved pp or cores; min-energy's setting cost 66. Here the table's
// cheapest (1x2x1) costs 112.5 and fine-tuning has no channel to take: the
// old code held it to the end. MinE's 1x1x1 is slower (40 Mbit/s against
// 95 at the table's first answer), so a trial judged on throughput went
// back; judged on J/GB it is kept, and the job ends within the ceiling.
TEST(HlaTuner, ACeilingTheTableCannotMeetIsMetByTheFormulasSettingJudgedOnJoules) {
  SimJob r = ceiling_out_of_the_tables_reach();
  ASSERT_EQ(r.p.chunks[0].p, 2) << r.p.reason;
  std::vector<double> looks;
  r.at(0.05, 30, [&](const Observation& ob) {
    if (!ob.settling) looks.push_back(*ob.dynamic_joules / (double(ob.bytes_interval) / 1e9));
  });
  nlohmann::json s = r.tuner->summary();
  EXPECT_EQ(r.p.chunks[0].cc, 1) << r.p.reason;
  EXPECT_EQ(r.p.chunks[0].p, 1) << r.p.reason;
  int rescues = 0, kept = 0;
  for (const auto& e : s["events"]) {
    if (e["event"] == "explore" && e.value("why", "") == "ceiling missed") ++rescues;
    if (e["event"] == "explored: kept") {
      ++kept;
      EXPECT_EQ(e["judged_on"], "J/GB") << e.dump();
    }
  }
  EXPECT_EQ(rescues, 1) << s.dump();
  EXPECT_EQ(kept, 1) << s.dump();
  ASSERT_GE(looks.size(), 10u);
  for (size_t i = looks.size() - 10; i < looks.size(); ++i) EXPECT_LE(looks[i], 100) << "look " << i;

  // Where MinE's setting costs more, it goes back and is not tried again
  // on the stratum; the table's setting stays.
  SimJob dear = ceiling_out_of_the_tables_reach(2.0);
  dear.at(0.05, 30);
  s = dear.tuner->summary();
  rescues = 0;
  for (const auto& e : s["events"]) {
    if (e["event"] == "explore") ++rescues;
    EXPECT_NE(e["event"], "explored: kept") << e.dump();
  }
  EXPECT_EQ(rescues, 1) << s.dump();
  EXPECT_EQ(dear.p.chunks[0].p, 2) << dear.p.reason;
}

// A ceiling's rescue is kept unless it measured dearer than the setting
// that missed by the need (the burden of proof is on the miss). Here MinE's
// setting costs 98 J/GB against the table's 112.5, both over the ceiling of
// 100, and a look scatters by +-35%: the trial reads cheaper, but not by
// twice the standard error. The old rule (kept only if cheaper by the
// need) sent the job back to 112.5; on hla-goals' mixed set two rescues
// went back so and their jobs ended at 118 J/GB where min-energy spent 72.
TEST(HlaTuner, ACeilingsRescueIsKeptUnlessClearlyDearer) {
  SimJob r = ceiling_out_of_the_tables_reach(98.0 / 75);
  r.sim.jgb_scatter = {0.65, 1.35, 0.8, 1.2};
  ASSERT_EQ(r.p.chunks[0].p, 2) << r.p.reason;
  r.at(0.05, 30);
  const nlohmann::json s = r.tuner->summary();
  nlohmann::json verdict;
  for (const auto& e : s["events"])
    if (verdict.is_null() && std::string(e["event"]).rfind("explored", 0) == 0) verdict = e;
  ASSERT_FALSE(verdict.is_null()) << s.dump();
  EXPECT_EQ(verdict["judged_on"], "J/GB") << verdict.dump();
  EXPECT_LT(verdict["gain"].get<double>(), verdict["needed"].get<double>()) << "the trial was cheaper by the need: "
                                                                               "this test judges the other case";
  EXPECT_EQ(verdict["event"], "explored: kept") << verdict.dump();
  EXPECT_EQ(r.p.chunks[0].p, 1) << r.p.reason;
}

// A ceiling met by MinE's setting, which won the rescue on the band the
// job leaves, keeps it across Algorithm 1's band switch: the new band's
// table answer is what missed the ceiling before. On hla-goals' html set
// the switch to the heavy band's 1x2x5 on 2 cores, from MinE's 1x1x8 on 1
// core at 74-90 J/GB, read 147-207 J/GB under a ceiling of 100. Here every
// setting costs 30% more at the heavy load: MinE's 97.5, the table's 146.
TEST(HlaTuner, MinEsSettingThatMetACeilingIsKeptAcrossABandSwitch) {
  SimJob r = ceiling_out_of_the_tables_reach(1.0, true);
  const auto base = r.sim.jgb_at;
  r.sim.jgb_at = [&r, base](const ChunkParams& c) { return base(c) * (r.sim.load > 0.3 ? 1.3 : 1.0); };
  r.at(0.05, 20);
  ASSERT_EQ(r.p.chunks[0].p, 1) << "the rescue kept MinE's setting: " << r.p.reason;
  int dear = 0;
  r.at(0.6, 12, [&](const Observation& ob) { dear += ob.params.chunks[0].p >= 2; });
  const nlohmann::json s = r.tuner->summary();
  EXPECT_EQ(events_named(s, "higher-load surface"), 1) << s.dump();
  EXPECT_EQ(events_named(s, "load surface: MinE's setting kept"), 1) << s.dump();
  EXPECT_EQ(dear, 0) << "looks at the table's dearer setting after the switch";
  EXPECT_EQ(r.p.chunks[0].p, 1) << r.p.reason;
}

// A ceiling's rescue across a move of the external load is kept where its
// own looks are within the ceiling (the promise is met at that setting);
// any other trial across a move has no verdict. On hla-goals' sets, whose
// cross traffic changes every 5 s, 7 of 19 rescues ended with no verdict
// (hla-goals-ceiling-ab-3b42eaf), the job back on the setting over the
// ceiling.
TEST(HlaTuner, ACeilingsRescueAcrossALoadMoveIsKeptWithinTheCeiling) {
  SimJob r = ceiling_out_of_the_tables_reach();
  bool began = false;
  for (int n = 0; n < 20 && !began; ++n) {
    r.at(0.05, 1);
    const nlohmann::json sum = r.tuner->summary();
    for (const auto& e : sum["events"]) began |= e["event"] == "explore";
  }
  ASSERT_TRUE(began) << r.tuner->summary().dump();
  r.at(0.3, 8);  // the load moves by 0.25 (past the step of 0.15) under the trial
  nlohmann::json verdict;
  const nlohmann::json sum = r.tuner->summary();
  for (const auto& e : sum["events"])
    if (verdict.is_null() && std::string(e["event"]).rfind("explored", 0) == 0) verdict = e;
  ASSERT_FALSE(verdict.is_null()) << r.tuner->summary().dump();
  EXPECT_EQ(verdict["event"], "explored: kept") << verdict.dump();
  EXPECT_EQ(r.p.chunks[0].p, 1) << r.p.reason;
}

// A chunk is never given more cc than it has files: past them cc opens no
// channel but counts against the channel limit. On hla-goals' mixed set the
// table answered cc 15 and 16 for the two large files, and a trial of p
// doubled for them did not fit under the limit.
TEST(HlaTuner, AChunkGetsNoMoreCcThanItHasFiles) {
  auto t = std::make_shared<hla::ParamTable>(*table());
  for (hla::TableStratum& st : t->strata) {
    st.files = 2, st.bytes = 2e7, st.size_mean = 1e7, st.size_sd = 0;
    for (hla::TableEntry& e : st.entries) e.choice.knobs.cc = 15;
  }
  TunerOptions o;
  o.hla_table = t;
  StartFacts info = job();
  info.chunks[0].files = {0, 1};
  info.chunks[0].bytes = uint64_t(2e7), info.chunks[0].size_sd = 0;
  for (const char* policy : {"hla-throughput", "hla-energy"}) {
    auto tuner = make_tuner(policy, o);
    Params p = tuner->init(info);
    EXPECT_EQ(tuner->summary()["chunks"][0]["source"].get<std::string>().rfind("table", 0), 0u)
        << policy << ": " << tuner->summary().dump();
    EXPECT_EQ(p.chunks[0].cc, 2) << policy << ": " << p.reason;
    EXPECT_NE(p.reason.find("held to its 2 files"), std::string::npos) << p.reason;
  }
}

TEST(HlaTuner, AChunkTheTableLacksIsStartedByThePredictorWhenTheTableHasOne) {
  auto t = std::make_shared<hla::ParamTable>(*table());
  std::vector<hla::Sample> levels;
  for (int cc : {1, 2, 4, 8}) {
    hla::Sample x;
    x.cc = cc;
    levels.push_back(x);
  }
  hla::train_predictor(*t, {}, levels, 3);
  ASSERT_TRUE(t->predictor.is_object());
  Params p;
  // Not served without a held-out record (no surfaces judged it here), nor
  // to a path outside the strata it learned from (one path: 100 Mbit/s, 40 ms).
  started_off_the_table(t, p);
  EXPECT_NE(p.reason.find("no predictor to serve it (its held-out R² rests on 0 cases"), std::string::npos) << p.reason;
  t->predictor["r2"] = 0.9, t->predictor["r2_cases"] = 10;
  started_off_the_table(t, p);
  EXPECT_NE(p.reason.find("RTT lies outside the strata it was trained on"), std::string::npos) << p.reason;
  // As if it had learned from strata that span this path too: served.
  for (size_t i : {0, 1}) t->predictor["inputs_lo"][i] = -2.0, t->predictor["inputs_hi"][i] = 5.0;
  auto tuner = started_off_the_table(t, p);
  EXPECT_NE(p.reason.find("the predictor says"), std::string::npos) << p.reason;
  EXPECT_EQ(tuner->summary()["chunks"][0]["source"], "predictor");
  // What it says is one of the table's settings (every band's answers are cc 2, 4 or 8).
  EXPECT_GE(p.chunks[0].cc, 1);
  EXPECT_LE(p.chunks[0].cc, 8);
}

// A job starts from its path (issue 55): where no link rate is configured,
// the table's record of the path (what its earlier jobs measured) places it
// among strata that differ by their link alone; not knowing it, the cache
// matches the path without the link and takes the first. The loss looked up
// is the measured one, the scale the strata sit on, before a configured one.
TEST(HlaTuner, AJobOnAKnownPathStartsFromItsMeasuredLinkAndLoss) {
  auto t = std::make_shared<hla::ParamTable>();
  t->history = "hand-made";
  auto stratum = [&](const char* id, double link, double loss, int cc) {
    hla::TableStratum s;
    s.id = id;
    s.link_mbps = link, s.rtt_ms = 40, s.loss_pct = loss;
    s.files = 1000, s.bytes = 1e10, s.size_mean = 1e7, s.size_sd = 1e5;
    s.rows = 30;
    hla::TableEntry e{"throughput", 1.0, link, {}};
    e.choice = {{cc, 1, 1, 1, 0}, link * 0.9, 50, true};
    s.entries.push_back(e);
    t->strata.push_back(s);
  };
  stratum("P1/D1/L1", 100, 0.05, 2);
  stratum("P2/D1/L1", 1000, 0.05, 16);
  stratum("P3/D1/L1", 1000, 0.0, 6);
  TunerOptions o;
  o.hla_table = t;
  o.explore_share = 0;
  auto start = [&](const StartFacts& info) {
    std::unique_ptr<Tuner> tuner = make_tuner("hla-throughput", o);
    return tuner->init(info);
  };
  StartFacts info = job();
  info.bandwidth_bps = 1000e6, info.loss_pct = -1;  // assumed, not configured
  Params unknown = start(info);
  EXPECT_NE(unknown.reason.find("P1/D1/L1"), std::string::npos) << unknown.reason;  // the first, link and loss unknown
  info.link_from_path = true, info.path_loss_pct = 0.05, info.loss_pct = 0.05;
  Params known = start(info);
  EXPECT_EQ(known.chunks[0].cc, 16) << known.reason;
  EXPECT_NE(known.reason.find("P2/D1/L1"), std::string::npos) << known.reason;
  // A configured 0% (netem's figure) where the flows measured 0.05%: looked
  // up by the measured figure.
  info.link_configured = true, info.link_from_path = false, info.loss_pct = 0;
  Params measured = start(info);
  EXPECT_NE(measured.reason.find("P2/D1/L1"), std::string::npos) << measured.reason;
  info.path_loss_pct = -1;
  Params configured = start(info);
  EXPECT_NE(configured.reason.find("P3/D1/L1"), std::string::npos) << configured.reason;
}

// A kernel knob the stratum's history never turned is not the table's to
// set: a stratum whose rows all ran on 2 cores puts 2 cores in every entry,
// which says nothing of one core (on hla-goals' link one core costs 0.83x
// the CPU a GB of two at 1x1x16: energy-sweep-1cc13fb). hla-energy takes
// MinE's cores where no chunk's stratum turned them, and the table's where
// one did.
TEST(HlaTuner, CoresNoRowTurnedAreLeftToTheFormulas) {
  auto on_two_cores = [] {  // the job, on a machine whose cores the tuner may turn
    StartFacts info = job();
    info.kernel.cores = true, info.kernel.cores_mode = "affinity", info.kernel.cores_present = 2;
    info.kernel.cores_online = 2;
    return info;
  };
  auto with_rows_on = [&](std::vector<int> cores) {
    auto t = std::const_pointer_cast<hla::ParamTable>(table());
    for (hla::TableStratum& s : t->strata) {
      for (hla::TableEntry& e : s.entries) e.choice.knobs.cores = 2;
      for (int c : cores) s.measured.push_back({{kBandCc[0], 1, 1, c, 0}, 2, 4, 0.1, 60, 2, 300});
    }
    TunerOptions o;
    o.hla_table = t;
    o.explore_share = 0;
    SimJob r{make_tuner("hla-energy", o)};
    r.p = r.tuner->init(on_two_cores());
    return r;
  };
  const int mine = make_tuner("min-energy", TunerOptions{})->init(on_two_cores()).cores;
  ASSERT_EQ(mine, 1) << "MinE starts on one core";
  SimJob only_two = with_rows_on({2, 2});
  EXPECT_EQ(only_two.p.cores, mine) << only_two.p.reason;
  EXPECT_NE(only_two.p.reason.find("not the table's to set"), std::string::npos) << only_two.p.reason;
  EXPECT_NE(only_two.p.reason.find("cores: MinE's 1"), std::string::npos) << only_two.p.reason;
  SimJob turned = with_rows_on({1, 2});
  EXPECT_EQ(turned.p.cores, 2) << turned.p.reason;
  EXPECT_EQ(turned.p.reason.find("not the table's to set"), std::string::npos) << turned.p.reason;
}
