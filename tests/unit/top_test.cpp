// xferctl top's screen, without a terminal (tools/xferctl/top.h); under tmux
// in tests/integration/observability_test.cpp.
#include "top.h"

#include <gtest/gtest.h>

#include <regex>

using namespace xferctl;

namespace {
TopSnapshot two_jobs() {
  TopSnapshot s;
  s.version = "1.0", s.cpus = 2, s.link_bps = 200e6, s.energy_source = "model:cpu";
  TopJob a;
  a.id = 12, a.user = "alice", a.policy = "throughput-target", a.cls = "foreground", a.state = "running";
  a.rate_bps = 150e6, a.done = 500'000'000, a.total = 1'500'000'000, a.joules = 12345, a.label = "nightly-backup";
  a.sla = "met", a.promise = "floor 100 Mbit/s";
  TopJob b;
  b.id = 7, b.user = "bob", b.policy = "min-energy", b.cls = "background", b.state = "queued";
  s.jobs = {a, b};
  return s;
}
}  // namespace

TEST(Top, EightyColumnsHoldEveryColumnAndAShortLabel) {
  std::vector<std::string> lines = top_lines(two_jobs(), 80, true);
  for (const std::string& l : lines) EXPECT_LE(l.size(), 80u) << l;
  std::string all;
  for (const std::string& l : lines) all += l + "\n";
  EXPECT_NE(all.find("jobs: 1 running, 1 queued"), std::string::npos) << all;
  EXPECT_NE(all.find("link 200.0 Mbit/s"), std::string::npos) << all;
  EXPECT_NE(all.find("moving 150.0 Mbit/s (75%)"), std::string::npos) << all;
  EXPECT_NE(all.find("SLA: 1 met, 0 missed"), std::string::npos) << all;
  // The running job: rate, share of the link, SLA, ETA (1 GB at 150 Mbit/s: 53 s), energy.
  const std::string* row = nullptr;
  for (const std::string& l : lines)
    if (l.rfind("   12 ", 0) == 0) row = &l;
  ASSERT_NE(row, nullptr) << all;
  for (const char* want : {"alice", "throughp~", "fgnd", "running", "150.0", "75%", "met", "54s", "12.3kJ", "nightly"})
    EXPECT_NE(row->find(want), std::string::npos) << want << " in\n" << *row;
  // A queued job has no rate, share or ETA.
  bool queued = false;
  for (const std::string& l : lines) {
    if (l.rfind("    7 ", 0) != 0) continue;
    queued = true;
    EXPECT_TRUE(std::regex_search(l, std::regex("queued\\s+-\\s+-\\s+-\\s+-"))) << l;  // rate, share, (no promise: no SLA), ETA, energy
  }
  EXPECT_TRUE(queued) << all;
}

TEST(Top, AWiderTerminalGivesTheLabelTheRestAndANonRootCallerNoUserColumn) {
  std::vector<std::string> wide = top_lines(two_jobs(), 120, false);
  std::string all;
  for (const std::string& l : wide) all += l + "\n";
  EXPECT_NE(all.find("nightly-backup"), std::string::npos) << all;
  EXPECT_EQ(all.find("USER"), std::string::npos) << all;
  EXPECT_EQ(all.find("alice"), std::string::npos) << all;
  TopSnapshot none;
  none.error = "xferd is not running";
  std::vector<std::string> err = top_lines(none, 80, true);
  bool said = false;
  for (const std::string& l : err) said = said || l.find("! xferd is not running") != std::string::npos;
  EXPECT_TRUE(said);
}
