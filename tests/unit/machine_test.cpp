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
    s.joules = ++calls > 1 ? per_sample : 0;  // the first call starts the clock
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
