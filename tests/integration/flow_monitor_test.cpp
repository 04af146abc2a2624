// The flow monitor for real: BPF loads and attaches (as root it is never
// skipped), and over xfer-linkemu its RTT, bytes, flow count and external
// load match what the link and libcurl say.
#include <gtest/gtest.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "fixture.h"
#include "link.h"
#include "xfer/running_job.h"
#include "xfer/control_loop.h"
#include "xfer/flow_monitor.h"
#include "xfer/machine.h"
#include "xfer/stats.h"

namespace fs = std::filesystem;
using namespace xtest;


TEST(FlowMonitor, EbpfLoadsAndAttaches) {
  ASSERT_EQ(geteuid(), 0u) << "the suite runs as root";
  auto m = xfer::make_flow_monitor(true);
  EXPECT_EQ(m->source(), "ebpf");
}

TEST(FlowMonitor, TcpInfoFallbackSaysWhatItIs) {
  auto m = xfer::make_flow_monitor(false);
  EXPECT_EQ(m->source(), "tcp_info");
}

namespace {
// A TCP connection over loopback: the client end (ours) and the server end.
struct LoopbackPair {
  int client = -1, server = -1;
  LoopbackPair() {
    int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (l < 0 || bind(l, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || listen(l, 1) != 0 ||
        getsockname(l, reinterpret_cast<sockaddr*>(&a), &len) != 0)
      return;
    client = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (connect(client, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) server = accept4(l, nullptr, nullptr, SOCK_CLOEXEC);
    close(l);
  }
  ~LoopbackPair() {
    if (client >= 0) close(client);
    if (server >= 0) close(server);
  }
  // n bytes from the server, read by the client.
  size_t move(size_t n) {
    std::vector<char> buf(n);
    size_t got = 0;
    if (::write(server, buf.data(), n) != ssize_t(n)) return 0;
    while (got < n) {
      ssize_t r = ::read(client, buf.data(), n - got);
      if (r <= 0) break;
      got += size_t(r);
    }
    return got;
  }
};

uint64_t bytes_of(const std::vector<xfer::FlowCounters>& fs, uint64_t id) {
  for (const auto& f : fs)
    if (f.id == id) return f.bytes_received;
  return 0;
}
}  // namespace

// xferctl's monitor: TCP_INFO from the start, eBPF once loaded. A flow
// owned before the load is handed over with its cumulative bytes unbroken,
// one that closed before the load is still reported (once), and one owned
// after is eBPF's from its start.
TEST(FlowMonitor, DeferredLoadHandsOpenFlowsOverUnbroken) {
  ASSERT_EQ(geteuid(), 0u) << "the suite runs as root";
  auto m = xfer::make_flow_monitor_deferred(true, std::chrono::milliseconds{0});
  LoopbackPair before, closes;
  ASSERT_GE(before.server, 0);
  ASSERT_GE(closes.server, 0);
  uint64_t id = m->own(before.client, 7), gone = m->own(closes.client, 7);
  ASSERT_NE(id, 0u);
  ASSERT_EQ(before.move(100000), 100000u);
  ASSERT_EQ(closes.move(5000), 5000u);
  m->disown(closes.client);
  close(closes.client);
  closes.client = -1;
  // flows() does not wait for the load: until it is done the source is tcp_info.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  std::vector<xfer::FlowCounters> first = m->flows(7);
  EXPECT_EQ(bytes_of(first, id), 100000u);
  int gone_seen = bytes_of(first, gone) == 5000u;
  while (m->source() != "ebpf" && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    auto fs = m->flows(7);
    gone_seen += bytes_of(fs, gone) == 5000u;
  }
  ASSERT_EQ(m->source(), "ebpf");
  EXPECT_EQ(m->source_note(), "TCP_INFO until eBPF had loaded");
  ASSERT_EQ(before.move(50000), 50000u);
  LoopbackPair after;
  uint64_t later = m->own(after.client, 7);
  ASSERT_EQ(after.move(3000), 3000u);
  std::this_thread::sleep_for(std::chrono::milliseconds(30));  // past the eBPF sample's 25-ms freshness
  std::vector<xfer::FlowCounters> fs = m->flows(7);
  gone_seen += bytes_of(fs, gone) == 5000u;
  EXPECT_EQ(bytes_of(fs, id), 150000u) << "the handed-over flow counts on from where TCP_INFO left it";
  EXPECT_EQ(bytes_of(fs, later), 3000u);
  EXPECT_EQ(gone_seen, 1) << "the flow closed before the load is reported once";
  EXPECT_GT(m->overhead().bpf_runs, 0u);
  // The load's own CPU (the BTF parsed, the programs verified), which the
  // job's control loop shows as a one-off of its interval
  // (Observation::one_off_cpu_s): more than a millisecond, less than a second.
  EXPECT_GT(m->load_ns(), 1000000u);
  EXPECT_LT(m->load_ns(), 1000000000u);
}

// With the load due later than the job lasts, nothing is loaded and the
// report says why the source is tcp_info.
TEST(FlowMonitor, AShortJobNeverLoadsEbpfAndSaysSo) {
  auto m = xfer::make_flow_monitor_deferred(true, std::chrono::milliseconds{60000});
  LoopbackPair c;
  ASSERT_GE(c.server, 0);
  uint64_t id = m->own(c.client, 3);
  ASSERT_EQ(c.move(20000), 20000u);
  EXPECT_EQ(bytes_of(m->flows(3), id), 20000u);
  EXPECT_EQ(m->source(), "tcp_info");
  EXPECT_NE(m->source_note().find("ended before eBPF was loaded"), std::string::npos);
  EXPECT_EQ(m->overhead().bpf_runs, 0u);
  EXPECT_EQ(m->load_ns(), 0u);
}

class FlowMonitorOverLink : public ::testing::TestWithParam<int> {};

// RTT within 10% of the emulated one; the flows' bytes within 1% of what
// libcurl counted; p = 4 on one file shows 4 flows; the BPF programs ran per
// sample, not per segment.
TEST_P(FlowMonitorOverLink, RttBytesAndFlowsMatchTheLink) {
  int rtt = GetParam();
  Dataset d = dataset(20, 4, 1, 0.5);
  Link link("fm" + std::to_string(rtt), 240 + rtt / 20, "--rate-mbps 200 --rtt-ms " + std::to_string(rtt) +
            " --queue-bytes 65536", d);
  ASSERT_TRUE(link.nginx_ok);
  Dataset video;
  for (auto& f : d.files)
    if (f.name.rfind("video-", 0) == 0) video.files.push_back(f);
  auto j = link.run(video.manifest("http://" + link.server_ip + ":8080/"), "--sla static --cc 1 --p 4 --interval-ms 500 --flows ebpf");
  ASSERT_FALSE(j.is_discarded());
  ASSERT_EQ(j["state"], "done");
  EXPECT_EQ(j["flow_source"], "ebpf");
  std::vector<double> rtts;
  int most_flows = 0;
  for (const auto& e : j["timeline"]) {
    if (!e.contains("rtt_ms")) continue;
    if (e["rtt_ms"].get<double>() > 0) rtts.push_back(e["rtt_ms"].get<double>());
    most_flows = std::max(most_flows, e["flows"].get<int>());
  }
  double m = xfer::median(rtts);
  std::printf("RTT %d ms: measured median %.2f ms over %zu intervals (error %.1f%%)\n", rtt, m, rtts.size(),
              100 * (m - rtt) / rtt);
  EXPECT_NEAR(m, rtt, 0.10 * rtt);
  double fetched = j["bytes_fetched"].get<double>(), flow = j["flow_bytes"].get<double>();
  std::printf("bytes: libcurl %.0f, flows %.0f (error %.3f%%)\n", fetched, flow, 100 * (flow - fetched) / fetched);
  EXPECT_NEAR(flow, fetched, 0.01 * fetched);
  EXPECT_EQ(most_flows, 4);
  // Sampled, not traced: the programs run once per socket per sample and per
  // state change, nowhere near once per received segment (about 75,000 here).
  double runs = j["flow_overhead"]["bpf_runs"].get<double>(), segments = fetched / 1448;
  std::printf("BPF runs %.0f for about %.0f segments; BPF %.3f ms, reader %.3f ms\n", runs, segments,
              j["flow_overhead"]["bpf_run_ms"].get<double>(), j["flow_overhead"]["reader_cpu_ms"].get<double>());
  EXPECT_GT(runs, 0);
  EXPECT_LT(runs, segments / 100);
}

INSTANTIATE_TEST_SUITE_P(Rtt, FlowMonitorOverLink, ::testing::Values(40, 100));

// iperf3 cross traffic at 40% of the link shows as external load of 0.4 +- 0.1.
TEST(FlowMonitor, CrossTrafficShowsAsExternalLoad) {
  Dataset d = dataset(20, 4, 1, 0.5);
  Link link("fmx", 247, "--rate-mbps 100 --rtt-ms 20 --cross 1:60:40", d);
  ASSERT_TRUE(link.nginx_ok);
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));  // cross traffic running
  // The video at the remaining ~60 Mbit/s: about 15 s, 15 intervals.
  Dataset video;
  for (auto& f : d.files)
    if (f.name.rfind("video-", 0) == 0) video.files.push_back(f);
  auto j = link.run(video.manifest("http://" + link.server_ip + ":8080/"),
                    "--sla static --cc 1 --p 1 --interval-ms 1000 --bandwidth-mbps 100");
  ASSERT_EQ(j["state"], "done");
  std::vector<double> ext;
  for (const auto& e : j["timeline"])
    if (e.contains("ext_load")) ext.push_back(e["ext_load"].get<double>());
  ASSERT_GE(ext.size(), 8u);
  ext.erase(ext.begin());  // the first interval has no interface baseline
  double m = xfer::median(ext);
  std::printf("external load: median %.3f over %zu intervals (configured 0.40)\n", m, ext.size());
  EXPECT_NEAR(m, 0.40, 0.10);
  // eBPF was loaded 2 s into this job (xferctl's default): its CPU shows in
  // one interval, as a one-off the tuners judge no setting's energy on.
  int one_off = 0;
  for (const auto& e : j["timeline"])
    if (e.contains("one_off_cpu_s")) {
      ++one_off;
      EXPECT_GT(e["t"].get<double>(), 1.5) << e.dump();
      EXPECT_NEAR(e["one_off_cpu_s"].get<double>() * 1e3, j["flow_overhead"]["load_cpu_ms"].get<double>(), 1e-6);
    }
  EXPECT_EQ(one_off, 1) << j["timeline"].dump();
  EXPECT_EQ(j["flow_source_note"], "TCP_INFO until eBPF had loaded");
}

