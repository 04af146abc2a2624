// Machine: machine-wide figures sampled once and divided among the jobs, with
// fake sources so that every share is known exactly.
#include "xfer/machine.h"

#include <gtest/gtest.h>
#include <unistd.h>

namespace {

// per_sample joules at every sample, whatever the time: every share is exact.
class FixedJoules : public xfer::EnergyMeter {
 public:
  std::string source() const override { return "fake"; }
  bool measured() const override { return true; }
  std::string basis() const override { return "a fixed number of joules per sample"; }
  xfer::EnergySample sample() override {
    xfer::EnergySample s;
    s.joules = s.dynamic_joules = ++calls > 1 ? per_sample : 0;  // the first call starts the clock
    return s;
  }
  int calls = 0;
  double per_sample = 10;
};

struct Fake {
  uint64_t iface = 0;
  uint64_t a = 0, b = 0;  // the two jobs' received bytes
  FixedJoules* meter = nullptr;
  std::unique_ptr<xfer::Machine> machine() {
    xfer::Machine::Sources s;
    auto m = std::make_unique<FixedJoules>();
    meter = m.get();
    s.meter = std::move(m);
    s.interface_rx_bytes = [this] { return iface; };
    return std::make_unique<xfer::Machine>(std::move(s));
  }
};

}  // namespace

TEST(Machine, EnergyIsDividedByBytesAndAddsUpToTheMachines) {
  Fake f;
  auto m = f.machine();
  m->join(1, [&] { return f.a; });  // sample 1: nobody present, 10 J to no job
  m->join(2, [&] { return f.b; });  // sample 2: job 1 alone, its 10 J
  f.a += 3000, f.b += 1000;
  f.iface += 4000 * 105 / 100;  // only the jobs' traffic (with headers)
  xfer::Machine::Share s1 = m->take(1);  // sample 3: 10 J split 3:1
  ASSERT_TRUE(s1.joules);
  EXPECT_DOUBLE_EQ(*s1.joules, 10 + 7.5);
  ASSERT_TRUE(s1.external_bytes);
  EXPECT_EQ(*s1.external_bytes, 0u);
  xfer::Machine::Share s2 = m->take(2);  // sample 4: no bytes moved: 5 J each
  EXPECT_DOUBLE_EQ(*s2.joules, 2.5 + 5);
  xfer::Machine::Share again = m->take(1);  // sample 5: 5 J each; job 1 got 5 from sample 4
  EXPECT_DOUBLE_EQ(*again.joules, 5 + 5);
  EXPECT_DOUBLE_EQ(m->joules_shared(), 40);
  // Every joule counted while a job was present went to exactly one job:
  // with the meter stopped, what is still owed is handed out.
  f.meter->per_sample = 0;
  double total = *s1.joules + *s2.joules + *again.joules + *m->take(2).joules + *m->take(1).joules;
  EXPECT_DOUBLE_EQ(total, m->joules_shared());
}

TEST(Machine, ExternalLoadIsTheInterfacesMinusEveryJobsBytes) {
  Fake f;
  auto m = f.machine();
  m->join(1, [&] { return f.a; });
  m->join(2, [&] { return f.b; });
  f.a += 1'000'000, f.b += 1'000'000;
  f.iface += 2'100'000 + 500'000;  // both jobs (with 5% headers) and 500 kB of someone else's
  EXPECT_EQ(*m->take(1).external_bytes, 500'000u);
  // Job 2 sees the same traffic: it is the machine's, not divided.
  EXPECT_EQ(*m->take(2).external_bytes, 500'000u);
  // Each job's own bytes never count as the other's external load.
  f.b += 5'000'000;
  f.iface += 5'250'000;
  EXPECT_EQ(*m->take(1).external_bytes, 0u);
}

TEST(Machine, MissingSourcesGiveMissingFigures) {
  auto m = std::make_unique<xfer::Machine>(xfer::Machine::Sources{});
  m->join(7, [] { return uint64_t(0); });
  xfer::Machine::Share s = m->take(7);
  EXPECT_FALSE(s.joules);
  EXPECT_FALSE(s.external_bytes);
  EXPECT_FALSE(s.cpu_pct);
}

TEST(Machine, TheLinkRateIsTheMostTheInterfacesReceivedInAQuarterSecond) {
  // No network.bandwidth_mbps: the link rate external load is a share of
  // is measured. 1 MB in about 0.3 s is about 27 Mbit/s; a slower window
  // after it does not lower it; a sample sooner than a quarter second after
  // the window began adds to the window, not a rate of its own.
  Fake f;
  auto m = f.machine();
  m->join(1, [&] { return f.a; });
  EXPECT_FALSE(m->take(1).link_bps.has_value()) << "nothing measured yet";
  f.iface += 1000000;
  usleep(300000);
  std::optional<double> first = m->take(1).link_bps;
  ASSERT_TRUE(first.has_value());
  EXPECT_GT(*first, 8e6 / 0.4);  // more than 1 MB over 0.4 s
  EXPECT_LT(*first, 8e6 / 0.3);
  f.iface += 100000;
  usleep(300000);
  EXPECT_DOUBLE_EQ(*m->take(1).link_bps, *first);
  f.iface += 50000000;  // 50 MB, but only 10 ms into a window
  usleep(10000);
  EXPECT_DOUBLE_EQ(*m->take(1).link_bps, *first);
  usleep(300000);
  EXPECT_GT(*m->take(1).link_bps, 8 * 50e6 / 0.4);  // the window it closes holds them
}

// Issue 55: two jobs at once, one holding 16 connections for few bytes, the
// other one connection for many. The machine's dynamic energy follows
// 2e-8 J a byte and 0.5 J a connection-second. By bytes alone the second job
// would be charged for most of what the first one's connections cost; split
// by what each one's bytes and connections cost, each is charged its own.
TEST(Machine, EnergyIsDividedByWhatEachJobsBytesAndConnectionsCost) {
  uint64_t now = 0, a = 0, b = 0;
  double conns_a = 16, conns_b = 1;
  xfer::Machine::Sources s;
  auto meter = std::make_unique<FixedJoules>();
  FixedJoules* m = meter.get();
  m->per_sample = 0;  // each step says its own
  s.meter = std::move(meter);
  s.now_ns = [&] { return now; };
  xfer::Machine machine(std::move(s));
  machine.join(1, [&] { return a; }, [&] { return conns_a; });
  machine.join(2, [&] { return b; }, [&] { return conns_b; });
  EXPECT_NE(machine.share_basis().find("by bytes"), std::string::npos) << machine.share_basis();
  double owed[2] = {0, 0}, cost[2] = {0, 0};
  // One second a step; the jobs' rates and connections vary, as jobs do.
  const double steps[][4] = {{2e6, 60e6, 16, 1}, {1e6, 80e6, 12, 1}, {3e6, 50e6, 16, 2},
                             {2e6, 70e6, 8, 1},  {1e6, 90e6, 16, 1}, {2e6, 60e6, 16, 1}};
  for (const auto& st : steps) {
    conns_a = st[2], conns_b = st[3];
    a += uint64_t(st[0]), b += uint64_t(st[1]);
    now += 1'000'000'000;
    const double ja = 2e-8 * st[0] + 0.5 * st[2], jb = 2e-8 * st[1] + 0.5 * st[3];
    m->per_sample = ja + jb;
    cost[0] += ja, cost[1] += jb;
    owed[0] += *machine.take(1).joules;
    m->per_sample = 0;
    owed[1] += *machine.take(2).joules;  // (the same instant: nothing more to divide)
  }
  // The first samples (before the fit is determined) went by bytes; from the
  // fourth on, each job's share is its cost.
  EXPECT_NEAR(owed[0] + owed[1], cost[0] + cost[1], 1e-9);
  const double late_a = 2e-8 * 1e6 + 0.5 * 16 + 2e-8 * 2e6 + 0.5 * 16;  // the last two steps' cost of job 1
  EXPECT_GT(owed[0], late_a) << "job 1's connections are charged to it";
  EXPECT_NE(machine.share_basis().find("connections cost"), std::string::npos) << machine.share_basis();
  // Job 1 holds 16 connections for 2 MB a second: by bytes it would get 3%
  // of a step's energy; by cost, its 8 J of connections.
  conns_a = 16, conns_b = 1;
  a += 2'000'000, b += 60'000'000;
  now += 1'000'000'000;
  m->per_sample = (2e-8 * 2e6 + 8) + (2e-8 * 60e6 + 0.5);
  const double got = *machine.take(1).joules;
  EXPECT_NEAR(got, 2e-8 * 2e6 + 8, 0.05);
}

// The machine's split forgets: a connection-second that costs four times
// more from the middle of the samples on (another policy's cores, say) is
// charged at its new cost, where a fit over every sample alike stays between.
TEST(Machine, TheEnergySplitLearnsWhatCostsNow) {
  xfer::EnergySplit forgets(0.99), keeps;
  for (int k = 0; k < 600; ++k) {  // 200 samples at the old cost, 400 at the new
    const double bytes = 1e7 * (1 + k % 5), conns = 2 + k % 7, per_conn = k < 200 ? 0.5 : 2.0;
    const double joules = 2e-8 * bytes + per_conn * conns;
    forgets.add(joules, {bytes}, {conns});
    keeps.add(joules, {bytes}, {conns});
  }
  ASSERT_TRUE(forgets.fitted());
  EXPECT_NEAR(forgets.per_connection_s(), 2.0, 0.05);
  EXPECT_LT(keeps.per_connection_s(), 1.8);
}
