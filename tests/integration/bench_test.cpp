// Quick xfer-bench runs: the harness works and every byte verifies. They
// assert nothing about speed (timings are not for tests). The quick wan
// scenario, whose min-energy client may take a core offline, runs with the
// hotplug tests (kernel_test.cpp).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>
#include <map>

#include "fixture.h"
#include "hla_report.h"
#include "report.h"

namespace fs = std::filesystem;
using namespace xtest;

// HTTPS in the bench: nginx with a certificate from the CA the bench makes,
// every client given that CA (a client that did not verify would still
// fetch; one that could not would fail here), h2 negotiated by ALPN where
// the client has it.
TEST(Bench, QuickTlsScenarioVerifiesEveryClientAgainstTheBenchCa) {
  std::string out = make_temp_dir("bench-tls");
  std::string scenario = std::string(XFER_SOURCE_DIR) + "/tests/bench/wan-tls.toml";
  int rc = sh(bin("xfer-bench") + " " + scenario + " --quick --dataset mixed --index 241 --out " + out + " > " + out +
              "/stdout 2> " + out + "/stderr");
  EXPECT_EQ(rc, 0) << "see " << out << "/stderr";
  auto rows = bench::read_csv(out + "/results.csv");
  size_t clients = 0;
  std::ifstream toml(scenario);
  for (std::string line; std::getline(toml, line);) clients += line.rfind("[[client]]", 0) == 0;
  ASSERT_GE(clients, 8u);
  ASSERT_EQ(rows.size(), clients);  // 1 dataset x every client x 1 repeat
  for (const auto& r : rows) {
    EXPECT_TRUE(r.verified) << r.client << ": " << r.files_ok << "/" << r.files << "; see " << out;
    EXPECT_EQ(r.exit_code, 0) << r.client;
  }
  EXPECT_TRUE(fs::exists(out + "/tls/ca.crt"));
  std::ifstream log(out + "/nginx/access.log");
  std::map<std::string, int> protocols;
  for (std::string line; std::getline(log, line);) {
    std::istringstream f(line);
    std::string msec, rt, conn, reqs, proto;
    f >> msec >> rt >> conn >> reqs >> proto;
    EXPECT_EQ(line.substr(line.rfind(' ') + 1), "8443") << line;  // nothing in clear text
    ++protocols[proto];
  }
  EXPECT_GT(protocols["HTTP/2.0"], 0) << "no client negotiated h2";
  EXPECT_GT(protocols["HTTP/1.1"], 0) << "wget and aria2c speak HTTP/1.1";
  // The clients wrote to the journaled ext4 the bench made, which is gone
  // again: not mounted, no loop device on its image, the image removed.
  std::ifstream summary(out + "/summary.md");
  std::string md((std::istreambuf_iterator<char>(summary)), std::istreambuf_iterator<char>());
  EXPECT_NE(md.find("Setup: clients write to a journaled ext4"), std::string::npos) << md;
  EXPECT_FALSE(fs::exists(out + "/work/dest-fs.img"));
  EXPECT_NE(sh("findmnt -M " + out + "/work/dest-fs >/dev/null"), 0) << "the bench left its file system mounted";
  fs::remove_all(out);
}

// The goal table's judgements on runs with known numbers: min-energy against
// the least peer's dynamic and end-system energy, the engine's CPU per GB
// against curl (one large file) at no less throughput.
TEST(Bench, GoalTableJudgesBothEnergiesAndTheEngine) {
  auto row = [](const std::string& client, const std::string& kind, const std::string& goal, double mbps, double cpu_s,
                double jpg, double end_jpg) {
    bench::RunRow r;
    r.dataset = "video", r.client = client, r.kind = kind, r.goal = goal, r.verified = true, r.files = 1;
    r.bytes = 1000000000, r.throughput_mbps = mbps, r.wall_s = 8000 / mbps, r.client_cpu_s = cpu_s;
    r.j_per_gb = jpg, r.end_j_per_gb = end_jpg;
    return r;
  };
  std::vector<bench::RunRow> rows = {
      row("curl", "curl-seq", "", 400, 1.0, 10, 50),         // the least peer on both energies
      row("wget", "wget", "", 300, 1.2, 12, 70),
      row("me-good", "xferctl", "min-energy", 420, 0.9, 9.5, 29),    // 0.95x dynamic, 0.58x end-system
      row("me-hot", "xferctl", "min-energy", 420, 1.1, 11, 29),      // dynamic over
      row("me-idle", "xferctl", "min-energy", 420, 0.9, 9.5, 31),    // end-system 0.62x
      row("eng-good", "xferctl", "engine", 395, 0.95, 10, 50),       // 0.99x curl's throughput: within 3%
      row("eng-slow", "xferctl", "engine", 380, 0.95, 10, 50),       // cheaper but slower
  };
  std::string md = bench::goals_markdown(rows, 500);
  auto line = [&](const std::string& client) {
    size_t at = md.find("| " + client + " |");
    return at == std::string::npos ? std::string() : md.substr(at, md.find('\n', at) - at);
  };
  EXPECT_NE(line("me-good").find("dynamic **met**, end-system **met**"), std::string::npos) << md;
  EXPECT_NE(line("me-hot").find("dynamic **missed**, end-system **met**"), std::string::npos) << md;
  EXPECT_NE(line("me-idle").find("dynamic **met**, end-system **missed**"), std::string::npos) << md;
  EXPECT_NE(line("eng-good").find("(0.95x curl)"), std::string::npos) << md;
  EXPECT_NE(line("eng-good").find("**met**"), std::string::npos) << md;
  EXPECT_NE(line("eng-slow").find("**missed**"), std::string::npos) << md;

  // Two files: the reference is curl --parallel (both in flight at once, as
  // the engine's cc=16), not curl one after the other; and with kernel
  // threads' CPU kept, the line gives the engine's and the reference's sums.
  std::vector<bench::RunRow> two;
  for (auto r : {row("curl", "curl-seq", "", 400, 1.0, 10, 50), row("curl -Z", "curl-parallel", "", 450, 1.1, 11, 48),
                 row("eng-two", "xferctl", "engine", 450, 1.05, 10.5, 47)}) {
    r.dataset = "video2", r.files = 2, r.kthread_cpu_s = r.kind == "xferctl" ? 0.05 : 0.15;
    two.push_back(r);
  }
  md = bench::goals_markdown(two, 500);
  EXPECT_NE(line("eng-two").find("(0.95x curl -Z)"), std::string::npos) << md;
  EXPECT_NE(line("eng-two").find("+ kernel threads 1.10 (0.88x)"), std::string::npos) << md;
  EXPECT_NE(line("eng-two").find("**met**"), std::string::npos) << md;
}

// The history benchmark's judgements on runs whose numbers are known: the
// best static, the convergence interval, and SLA adherence per interval,
// right after a switch included (hla_report.h).
TEST(Bench, HlaReportJudgesConvergenceAndAdherenceOnKnownRuns) {
  auto run = [](std::string client, std::string goal, double thr, std::vector<double> mbps) {
    bench::RunRow r;
    r.dataset = "html-test", r.client = client, r.goal = goal, r.kind = "xferctl", r.verified = true, r.bytes = 1000000;
    r.throughput_mbps = thr, r.j_per_gb = 100;
    for (size_t i = 0; i < mbps.size(); ++i) r.timeline.push_back({0.5 * double(i + 1), mbps[i], NAN, NAN});
    std::vector<double> mid;  // without the first and the last, as xfer-bench reads it
    for (size_t i = 1; i + 1 < mbps.size(); ++i) mid.push_back(mbps[i]);
    r.steady_mbps = bench::median(mid);
    return r;
  };
  bench::HlaContext ctx;
  ctx.switches_s = {1.0};  // intervals starting at 1.0 and 1.5 are "after" it
  std::vector<bench::RunRow> rows = {
      run("static a", "static", 80, {50, 90, 90, 90, 10}),
      run("static b", "static", 100, {50, 110, 110, 110, 10}),  // the best: target 0.9 x 110 = 99
      run("hla-throughput", "hla-throughput", 98, {100, 105, 50, 104, 106}),
      run("max-throughput", "max-throughput", 70, {20, 60, 99.5, 100, 100}),
  };
  EXPECT_EQ(bench::convergence_interval(rows[2].timeline, 110), 1);
  EXPECT_EQ(bench::convergence_interval(rows[3].timeline, 110), 3);
  EXPECT_EQ(bench::convergence_interval(rows[3].timeline, 1000), 0);

  // A floor of 50: intervals 2-5 are judged (the first and the last are not).
  bench::RunRow floor = run("hla-throughput floor 50", "hla-throughput", 60, {10, 60, 40, 70, 55, 5});
  floor.floor_mbps = 50;
  bench::Adherence a = bench::floor_adherence(floor, 50, ctx);
  EXPECT_EQ(a.intervals, 4);
  EXPECT_EQ(a.met, 3);
  EXPECT_EQ(a.after_switch, 2);  // 40 (from 1.0 s) and 70 (from 1.5 s)
  EXPECT_EQ(a.after_met, 1);
  EXPECT_DOUBLE_EQ(a.worst, 0.8);
  // A budget of 100 J/GB with 5% tolerance; an interval without energy is skipped.
  bench::RunRow budget = run("hla-energy budget 100", "hla-energy", 60, {60, 60, 60, 60, 60, 60});
  budget.budget_j_per_gb = 100;
  const double jpg[] = {500, 104, 110, NAN, 90, 500};
  for (size_t i = 0; i < 6; ++i) budget.timeline[i].j_per_gb = jpg[i];
  bench::Adherence b = bench::budget_adherence(budget, 100, 0.05, ctx);
  EXPECT_EQ(b.intervals, 3);
  EXPECT_EQ(b.met, 2);
  EXPECT_DOUBLE_EQ(b.worst, 1.1);
  // The ceiling bounds the dynamic energy: where the timeline has it, that is
  // what is judged (the end system's 500 J/GB include the idle draw).
  bench::RunRow dyn = budget;
  for (auto& p : dyn.timeline) p.dynamic_j_per_gb = 50;
  bench::Adherence d = bench::budget_adherence(dyn, 100, 0.05, ctx);
  EXPECT_EQ(d.met, d.intervals);
  EXPECT_DOUBLE_EQ(d.worst, 0.5);
  rows.push_back(floor);
  rows.push_back(budget);

  std::string md = bench::hla_markdown(rows, ctx);
  EXPECT_NE(md.find("Best static: static b (100.0 Mbit/s whole run, 110.0 sustained; convergence at >= 99.0)"),
            std::string::npos) << md;
  EXPECT_NE(md.find("| convergence | hla-throughput | interval 1 | the first (the best static's own: 2) | **met** |"), std::string::npos) << md;
  EXPECT_NE(md.find("| throughput vs best static | hla-throughput | 98.0 / 100.0 = 0.98x | >= 0.95x | **met** |"),
            std::string::npos) << md;
  EXPECT_NE(md.find("| throughput vs max-throughput | hla-throughput | 1.40x | >= 1.2x | **met** |"), std::string::npos)
      << md;
  EXPECT_NE(md.find("| floor 50 Mbit/s | hla-throughput floor 50 | 3/4 (75%) of intervals; after a switch 1/2 (50%); "
                    "worst 0.80x | >= 95% | **missed** |"),
            std::string::npos) << md;
  EXPECT_NE(md.find("| budget 100 J/GB (dynamic) | hla-energy budget 100 | 2/3 (67%) of intervals within 5%"), std::string::npos)
      << md;
  // The plot draws one line per run given, the switch dashed.
  std::string svg = bench::timeline_svg("t", {&rows[2], &rows[3]}, ctx);
  size_t lines = 0;
  for (size_t at = 0; (at = svg.find("<polyline", at)) != std::string::npos; ++at) ++lines;
  EXPECT_EQ(lines, 2u);
  EXPECT_NE(svg.find("stroke-dasharray"), std::string::npos);
}
