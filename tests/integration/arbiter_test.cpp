// control/arbiter.cpp with real jobs over xfer-linkemu: a floor holds while a
// bulk job shares the link.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <thread>
#include <nlohmann/json.hpp>

#include "fixture.h"
#include "link.h"
#include "hosts.h"
#include "together.h"
#include "xfer/stats.h"

using namespace xtest;

namespace {

std::string manifest_of(const Dataset& d, const std::string& prefix, const std::string& base) {
  Dataset part;
  for (const auto& f : d.files)
    if (f.name.rfind(prefix, 0) == 0) part.files.push_back(f), part.bytes += f.size;
  return part.manifest(base);
}

}  // namespace

// A throughput-target job with a 120 Mbit/s floor, started 3 s after a
// max-throughput job on a 300 Mbit/s, 40 ms link: the arbiter sets the floor
// aside and caps the bulk job to the rest, and the floor job starts from
// what one channel carries and corrects multiplicatively, so the floor holds
// in nearly every interval after the floor job's first two (issue 39
// measured 7 of 24 without an arbiter), while the bulk job still moves most
// of what the floor leaves.
//
// With no configured rate (link_mbps 0, the shipped config's case) the
// arbiter has no capacity until the jobs show the link full (issue 54: a
// queue on the path, their flows' RTT above the least they saw), and from
// then on serves the floor the same way.
void floor_holds_beside_a_bulk_job(double link_mbps, const char* name, int index) {
  Dataset d = dataset(0, 80, 2, 1.0);
  Link link(name, index, "--rate-mbps 300 --rtt-ms 40 --queue-bytes 1500000", d);
  ASSERT_TRUE(link.nginx_ok);
  const std::string base = "http://" + link.server_ip + ":8080/";
  Planned bulk{manifest_of(d, "video-", base), "max-throughput", {}, {0, 0, xfer::JobClass::Normal}, 0};
  Planned floor{manifest_of(d, "image-", base), "throughput-target", {}, {0, 0, xfer::JobClass::Normal}, 3};
  floor.tuner.target_mbps = 120;
  nlohmann::json r = run_together(link, {bulk, floor}, Together{link_mbps});
  ASSERT_TRUE(r.is_object());
  ASSERT_EQ(r["jobs"].size(), 2u);
  for (const auto& j : r["jobs"]) ASSERT_EQ(j["state"], "done") << j.dump(1).substr(0, 2000);
  const auto& tl = r["jobs"][1]["timeline"];
  const auto& bulk_tl = r["jobs"][0]["timeline"];
  // After the first two intervals, up to the tail (the last interval, and
  // those within two intervals of the end, which drain).
  int met = 0, counted = 0;
  for (size_t i = 2; i + 1 < tl.size(); ++i) {
    if (tl[i].value("near_end", false)) continue;
    ++counted;
    const double mbps = tl[i]["throughput_mbps"].get<double>();
    met += mbps >= 0.95 * 120;
    std::printf("floor job interval %zu: %.1f Mbit/s\n", i, mbps);
  }
  // What the bulk job moved beside the floor, over its allotment. Where the
  // link's rate is measured the allotment probes above the link (an estimate
  // that caps doubles while the capped jobs move at their caps without a
  // queue), so there it is taken up to what the floor leaves of the emulated
  // link (95% of 300 for bodies, less the 132 set aside), and the allotment
  // itself is judged against that: an estimate that holds the bulk job far
  // under what the floor leaves fails here, and a link emulator slowed by
  // other work beside the test (its packets late, the link carrying less than
  // 300: a CI run measured the path full at 240 Mbit/s) does not.
  const double leaves = 0.95 * 300 - 1.1 * 120;
  std::vector<double> bulk_share, allotted_share;
  for (const auto& e : bulk_tl)
    if (e.value("allotted_mbps", 0.0) > 0 && !e.value("near_end", false)) {
      const double allotted = e["allotted_mbps"].get<double>();
      bulk_share.push_back(e["throughput_mbps"].get<double>() / (link_mbps > 0 ? allotted : std::min(allotted, leaves)));
      allotted_share.push_back(allotted / leaves);
    }
  std::sort(bulk_share.begin(), bulk_share.end());
  std::sort(allotted_share.begin(), allotted_share.end());
  const double bulk_median = bulk_share.empty() ? 0 : bulk_share[bulk_share.size() / 2];
  const double allotted_median = allotted_share.empty() ? 0 : allotted_share[allotted_share.size() / 2];
  std::printf("floor met (>= 114 Mbit/s) in %d of %d intervals after the first two; bulk job moved a median %.0f%% "
              "of its allotment over %zu capped intervals; its allotment a median %.0f%% of what the floor leaves\n",
              met, counted, bulk_median * 100, bulk_share.size(), allotted_median * 100);
  ASSERT_GE(counted, 5);
  EXPECT_GE(met, counted * 8 / 10);
  ASSERT_GE(bulk_share.size(), 3u) << "the bulk job was never capped";
  EXPECT_GE(bulk_median, 0.8);
  if (link_mbps <= 0) {
    EXPECT_GE(allotted_median, 0.8) << "the measured link holds the bulk job under what the floor leaves";
  }
}

TEST(ArbiterLink, AFloorHoldsWhileABulkJobSharesTheLink) { floor_holds_beside_a_bulk_job(300, "arb", 246); }
TEST(ArbiterLink, AFloorHoldsBesideABulkJobWithNoConfiguredRate) { floor_holds_beside_a_bulk_job(0, "arbm", 238); }

// A background job alone takes the idle link; when a foreground job arrives
// it gives the link back within two intervals (BITS's background class), and
// takes it again when the foreground job is done. With no configured rate
// the link shows full only once its queue has stood two intervals (6f8172f),
// so the foreground job's 120 images last long enough to be judged beside it:
// with 40 it ended two intervals after the background job was held back.
void background_takes_the_idle_link_and_yields(double link_mbps, const char* name, int index) {
  Dataset d = dataset(0, 120, 2, 1.0);
  Link link(name, index, "--rate-mbps 300 --rtt-ms 40 --queue-bytes 1500000", d);
  ASSERT_TRUE(link.nginx_ok);
  const std::string base = "http://" + link.server_ip + ":8080/";
  Planned bg{manifest_of(d, "video-", base), "max-throughput", {}, {0, 0, xfer::JobClass::Background}, 0};
  Planned fg{manifest_of(d, "image-", base), "max-throughput", {}, {0, 1, xfer::JobClass::Foreground}, 4};
  nlohmann::json r = run_together(link, {bg, fg}, Together{link_mbps});
  ASSERT_TRUE(r.is_object());
  ASSERT_EQ(r["jobs"].size(), 2u);
  for (const auto& j : r["jobs"]) ASSERT_EQ(j["state"], "done") << j.dump(1).substr(0, 2000);
  const auto& tl = r["jobs"][0]["timeline"];
  // The background job's intervals by its own clock; the foreground job
  // started about 4 s in (after its discovery) and ran its images.
  double alone = 0;
  int alone_n = 0;
  std::vector<double> capped;
  for (const auto& e : tl) {
    const double t = e["t"].get<double>(), mbps = e["throughput_mbps"].get<double>();
    if (t > 1.5 && t <= 4 && !e.contains("allotted_mbps")) alone += mbps, ++alone_n;
    if (e.value("allotted_mbps", 0.0) > 0) capped.push_back(mbps);
    std::printf("background t=%.1f s: %.1f Mbit/s%s\n", t, mbps,
                e.contains("allotted_mbps") ? (" (allotted " + std::to_string(e["allotted_mbps"].get<double>()) + ")").c_str()
                                            : "");
  }
  ASSERT_GT(alone_n, 0);
  ASSERT_GE(capped.size(), 3u) << "the background job was never held back";
  std::printf("background alone: %.0f Mbit/s; held back: %zu intervals, the second on %.1f Mbit/s\n", alone / alone_n,
              capped.size(), capped[1]);
  EXPECT_GE(alone / alone_n, 0.8 * 300);
  // By its second interval held back (the first is partly before the
  // foreground job came) it moves no more than a few Mbit/s: its minimum of
  // 1 Mbit/s and what was in flight. (Later it may take what the foreground
  // job leaves.)
  EXPECT_LT(capped[1], 15);
}

TEST(ArbiterLink, BackgroundTakesTheIdleLinkAndYieldsWithinTwoIntervals) {
  background_takes_the_idle_link_and_yields(300, "arbbg", 245);
}
TEST(ArbiterLink, BackgroundYieldsWithNoConfiguredRate) { background_takes_the_idle_link_and_yields(0, "arbbgm", 239); }


namespace {

// The per-interval throughputs of a report's timeline by second since the
// set started (the job's own t plus when it started).
std::map<int, double> by_second(const nlohmann::json& report, double start_s) {
  std::map<int, double> m;
  const auto& tl = report["timeline"];
  for (size_t i = 0; i + 1 < tl.size(); ++i) {  // not the last: the tail drains
    const auto& e = tl[i];
    if (e.value("near_end", false)) continue;
    m[int(e["t"].get<double>() + start_s + 0.5)] = e["throughput_mbps"].get<double>();
  }
  return m;
}

}  // namespace

// Two equal max-throughput jobs of two users share the link fairly: over
// the seconds both run (after the first two, before either drains), Jain's
// index of their mean throughputs (issue 39's goal: >= 0.95). And a user
// with three jobs against a user with one gets the same share of the link:
// the division is by user first, then by the user's jobs.
TEST(ArbiterLink, EqualJobsAndUsersShareTheLinkFairly) {
  Dataset d = dataset(0, 0, 8, 0.5);
  Link link("arbfair", 244, "--rate-mbps 300 --rtt-ms 40 --queue-bytes 1500000", d);
  ASSERT_TRUE(link.nginx_ok);
  const std::string base = "http://" + link.server_ip + ":8080/";
  // Four equal slices of the videos: user 1000 runs three, user 2000 one.
  std::vector<Planned> plan;
  for (int k = 0; k < 4; ++k) {
    Dataset part;
    for (size_t i = k; i < d.files.size(); i += 4) part.files.push_back(d.files[i]);
    plan.push_back(Planned{part.manifest(base), "max-throughput", {}, {0, k < 3 ? 1000u : 2000u, xfer::JobClass::Normal}, 0});
  }
  nlohmann::json r = run_together(link, plan, Together{300});
  ASSERT_TRUE(r.is_object());
  ASSERT_EQ(r["jobs"].size(), 4u);
  for (const auto& j : r["jobs"]) ASSERT_EQ(j["state"], "done") << j.dump(1).substr(0, 2000);
  std::vector<std::map<int, double>> s;
  for (const auto& j : r["jobs"]) s.push_back(by_second(j, 0));
  // The seconds every job runs, after the first two.
  std::vector<double> user1, user2;
  for (const auto& [sec, mbps] : s[3]) {
    if (sec < 3 || !s[0].count(sec) || !s[1].count(sec) || !s[2].count(sec)) continue;
    user1.push_back(s[0][sec] + s[1][sec] + s[2][sec]);
    user2.push_back(mbps);
    std::printf("t=%d s: user 1000 %.1f (%.1f + %.1f + %.1f), user 2000 %.1f Mbit/s\n", sec, user1.back(), s[0][sec],
                s[1][sec], s[2][sec], mbps);
  }
  ASSERT_GE(user1.size(), 4u) << "the jobs ran together for too short a time";
  auto mean = [](const std::vector<double>& v) {
    double t = 0;
    for (double x : v) t += x;
    return t / double(v.size());
  };
  const double u1 = mean(user1), u2 = mean(user2);
  // Within user 1000, its three jobs' shares.
  std::vector<double> own(3, 0);
  for (int k = 0; k < 3; ++k)
    for (const auto& [sec, mbps] : s[k])
      if (sec >= 3 && s[3].count(sec)) own[k] += mbps;
  const double j_users = xfer::jain_index({u1, u2}), j_own = xfer::jain_index(own);
  std::printf("user shares: %.1f vs %.1f Mbit/s (Jain %.3f, ratio %.2f); user 1000's own jobs: Jain %.3f\n", u1, u2,
              j_users, u1 / u2, j_own);
  // Goals: per-user shares within 10%, Jain >= 0.95 between equal jobs;
  // measured 1.00 and 1.00, the shares within 1% (each job's cap holds over
  // all its requests: rate_limit.h). The test allows a loaded CI machine 15%.
  EXPECT_GE(j_users, 0.95);
  EXPECT_GE(j_own, 0.95);
  EXPECT_NEAR(u1 / u2, 1.0, 0.15);
}

// Two max-throughput jobs (32 channels each) on one origin under a limit of
// 8 connections per origin over all jobs: the server never sees more than
// the limit (and the probes of a discovery), and the jobs share it.
TEST(ArbiterLink, APerOriginLimitHoldsOverAllJobs) {
  Dataset d = dataset(0, 0, 8, 0.25);
  Link link("arbconn", 243, "--rate-mbps 300 --rtt-ms 40 --queue-bytes 1500000", d);
  ASSERT_TRUE(link.nginx_ok);
  const std::string base = "http://" + link.server_ip + ":8080/";
  std::vector<Planned> plan;
  for (int k = 0; k < 2; ++k) {
    Dataset part;
    for (size_t i = k; i < d.files.size(); i += 2) part.files.push_back(d.files[i]);
    plan.push_back(Planned{part.manifest(base), "max-throughput", {}, {0, uint32_t(1000 + k), xfer::JobClass::Normal}, 0});
  }
  Together how{300};
  how.origin_connections = 8;
  nlohmann::json r = run_together(link, plan, how);
  ASSERT_TRUE(r.is_object());
  for (const auto& j : r["jobs"]) ASSERT_EQ(j["state"], "done") << j.dump(1).substr(0, 2000);
  const int most = r["most_connections"].get<int>();
  std::vector<double> mean(2, 0);
  for (int k = 0; k < 2; ++k) {
    int n = 0;
    for (const auto& [sec, mbps] : by_second(r["jobs"][k], 0))
      if (sec >= 3) mean[k] += mbps, ++n;
    mean[k] /= std::max(1, n);
  }
  std::printf("most connections to the origin at once: %d (limit 8); the jobs moved %.1f and %.1f Mbit/s\n", most,
              mean[0], mean[1]);
  // The jobs' own channels: 64 without the limit. A discovery's probe and
  // its connection opened ahead may add two while the other job runs.
  EXPECT_LE(most, 8 + 2);
  EXPECT_GE(most, 4);
  EXPECT_GE(xfer::jain_index({mean[0], mean[1]}), 0.9);
}

// The kernel layer serves the jobs together (xfer/kernel_share.h): a
// min-energy job that wants one core runs on the cores a max-throughput job
// beside it asks for, and goes down to its own ask when that job is done.
// Affinity mode: the cores are the test's own threads' (this machine has 2).
TEST(ArbiterLink, TheKernelLayerServesTheJobsTogether) {
  Dataset d = dataset(0, 120, 2, 0.25);
  Link link("arbkern", 242, "--rate-mbps 300 --rtt-ms 40 --queue-bytes 1500000", d);
  ASSERT_TRUE(link.nginx_ok);
  const std::string base = "http://" + link.server_ip + ":8080/";
  Planned bulk{manifest_of(d, "video-", base), "max-throughput", {}, {0, 1000, xfer::JobClass::Normal}, 0};
  Planned frugal{manifest_of(d, "image-", base), "min-energy", {}, {0, 2000, xfer::JobClass::Normal}, 0};
  Together how{300};
  how.shared_kernel = true;
  nlohmann::json r = run_together(link, {bulk, frugal}, how);
  ASSERT_TRUE(r.is_object());
  ASSERT_FALSE(r.contains("kernel_note")) << r["kernel_note"];
  for (const auto& j : r["jobs"]) ASSERT_EQ(j["state"], "done") << j.dump(1).substr(0, 2000);
  const double bulk_end = r["jobs"][0]["timeline"].back()["t"].get<double>();
  for (size_t k = 0; k < 2; ++k)
    for (const auto& e : r["jobs"][k]["timeline"])
      std::printf("job %zu t=%.1f s: %.1f Mbit/s, cores %s\n", k + 1, e["t"].get<double>(),
                  e["throughput_mbps"].get<double>(), e.contains("cores") ? e["cores"].dump().c_str() : "-");
  // The min-energy job's cores while the bulk job ran, and after.
  int most_during = 0, last_after = 0;
  for (const auto& e : r["jobs"][1]["timeline"]) {
    if (!e.contains("cores")) continue;
    const int c = e["cores"].get<int>();
    if (e["t"].get<double>() < bulk_end - 1) most_during = std::max(most_during, c);
    else last_after = c;
  }
  std::printf("the min-energy job ran on up to %d cores beside the bulk job, %d after it\n", most_during, last_after);
  EXPECT_EQ(most_during, 2);
  if (last_after) {
    EXPECT_EQ(last_after, 1);
  }
}

// Two hosts behind one bottleneck, each with its own xferd (no arbiter in
// common), each max-throughput with Falcon's cost per stream (K = 1.02):
// the second starts 5 s after the first; within 30 s of that they split the
// link fairly (Jain's index of their throughputs over the intervals both
// run, after the second's first five), and neither escalates its streams
// (without the cost each takes all 32 of max_channels).
TEST(ArbiterLink, TwoXferdBehindOneBottleneckSplitItWithoutEscalating) {
  Dataset d = dataset(0, 0, 4, 1.0);
  Link link("arbfleet", 241, "--rate-mbps 300 --rtt-ms 40 --queue-bytes 1500000", d);
  ASSERT_TRUE(link.nginx_ok);
  TwoHosts hosts(link);
  ASSERT_TRUE(hosts.ok);
  const std::string base = "http://" + link.server_ip + ":8080/";
  nlohmann::json r[2];
  xtest::Started started[2];
  for (int h = 0; h < 2; ++h) {
    Planned p{d.manifest(base), "max-throughput", {}, {0, 1000, xfer::JobClass::Normal}, h == 0 ? 0.0 : 5.0};
    p.tuner.stream_cost = 1.02;
    Together how{300};
    how.arbiter = false;  // two machines: nothing in common but the link
    how.ns = hosts.host_ns(h + 1);
    how.tag = "h" + std::to_string(h + 1);
    started[h] = xtest::start_together(link, {p}, how);
  }
  for (int h = 0; h < 2; ++h) r[h] = xtest::finish_together(started[h]);
  for (int h = 0; h < 2; ++h) {
    ASSERT_TRUE(r[h].is_object()) << h;
    ASSERT_EQ(r[h]["jobs"][0]["state"], "done") << r[h]["jobs"][0].dump(1).substr(0, 2000);
  }
  auto first = by_second(r[0]["jobs"][0], 0), second = by_second(r[1]["jobs"][0], 5);
  int most_channels[2] = {0, 0};
  for (int h = 0; h < 2; ++h)
    for (const auto& e : r[h]["jobs"][0]["timeline"]) {
      int n = 0;
      for (const auto& c : e["params"]) n += c["cc"].get<int>() * c["p"].get<int>();
      most_channels[h] = std::max(most_channels[h], n);
    }
  std::vector<double> a, b;
  for (const auto& [sec, mbps] : second) {
    std::printf("t=%d s: host 1 %.1f, host 2 %.1f Mbit/s\n", sec, first.count(sec) ? first[sec] : -1.0, mbps);
    if (sec < 5 + 5 || sec > 5 + 30 || !first.count(sec)) continue;
    a.push_back(first[sec]), b.push_back(mbps);
  }
  ASSERT_GE(a.size(), 4u) << "the hosts ran together for too short a time";
  double ma = 0, mb = 0;
  for (size_t k = 0; k < a.size(); ++k) ma += a[k] / double(a.size()), mb += b[k] / double(a.size());
  const double j = xfer::jain_index({ma, mb});
  std::printf("host 1 %.1f, host 2 %.1f Mbit/s over %zu s together (Jain %.3f); most channels %d and %d; falcon: %s / %s\n",
              ma, mb, a.size(), j, most_channels[0], most_channels[1], r[0]["jobs"][0]["tuner"].dump().c_str(),
              r[1]["jobs"][0]["tuner"].dump().c_str());
  EXPECT_GE(j, 0.9);
  EXPECT_GT(ma + mb, 0.8 * 285);  // the link stays full
  EXPECT_LT(most_channels[0] + most_channels[1], 2 * 32);  // bounded below what each would take alone
}

// A floor alone on a lossy long path (issue 39: 300 Mbit/s, 60 ms, 0.01%
// loss, 600 files of ~100 KB; one channel more per interval from one
// reached 26 Mbit/s for the whole job): throughput-target starts at the
// channels its floor needs on the path and corrects multiplicatively, so it
// holds 120 Mbit/s from its third interval.
TEST(ArbiterLink, AFloorAloneOnALossyLongPathHoldsFromItsThirdInterval) {
  Dataset d = dataset(1500, 0, 0);  // the shape, longer: more intervals to judge
  Link link("arbloss", 240, "--rate-mbps 300 --rtt-ms 60 --loss-pct 0.01", d);
  ASSERT_TRUE(link.nginx_ok);
  const std::string base = "http://" + link.server_ip + ":8080/";
  Planned floor{d.manifest(base), "throughput-target", {}, {0, 0, xfer::JobClass::Normal}, 0};
  floor.tuner.target_mbps = 120;
  nlohmann::json r = run_together(link, {floor}, Together{300});
  ASSERT_TRUE(r.is_object());
  ASSERT_EQ(r["jobs"][0]["state"], "done") << r["jobs"][0].dump(1).substr(0, 2000);
  const auto& tl = r["jobs"][0]["timeline"];
  int met = 0, counted = 0;
  for (size_t i = 0; i < tl.size(); ++i) {
    const double mbps = tl[i]["throughput_mbps"].get<double>();
    std::printf("interval %zu: %.1f Mbit/s (%s)\n", i + 1, mbps, tl[i]["reason"].get<std::string>().c_str());
    if (i < 2 || i + 1 == tl.size() || tl[i].value("near_end", false)) continue;
    ++counted, met += mbps >= 0.95 * 120;
  }
  std::printf("floor met in %d of %d intervals from the third; the job moved %.1f Mbit/s\n", met, counted,
              r["jobs"][0]["throughput_mbps"].get<double>());
  ASSERT_GE(counted, 1);
  EXPECT_GE(met, counted * 8 / 10);
}
