// xfer-linkemu for real: two namespaces, TUN devices, the forwarding threads.
#include <gtest/gtest.h>

#include <algorithm>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "fixture.h"

namespace fs = std::filesystem;
using namespace xtest;

namespace {

std::string netns_list() {
  std::string out;
  FILE* p = popen("ip netns list", "r");
  char buf[256];
  while (p && fgets(buf, sizeof buf, p)) out += buf;
  if (p) pclose(p);
  return out;
}

}  // namespace

// RTT and rate as configured, seen by TCP through curl; clean stop on SIGTERM.
TEST(Linkemu, CarriesTcpAtTheConfiguredRttAndRate) {
  std::string work = make_temp_dir("linkemu");
  Dataset d = dataset(20, 4, 1, 0.5);
  pid_t link = start_link("--name lt1 --index 231 --rate-mbps 50 --rtt-ms 40", work + "/link.out");
  ASSERT_NE(netns_list().find("xfer-lt1-c"), std::string::npos);
  std::string nginx_run = work + "/nginx";
  ASSERT_EQ(sh("ip netns exec xfer-lt1-s bash " + std::string(XFER_SOURCE_DIR) + "/scripts/nginx-serve.sh start " +
               nginx_run + " " + d.dir + " 8080 8081 2m 10.201.231.2"),
            0);
  // time_connect is one round trip (SYN, SYN-ACK); a 2.4 MB image measures the rate.
  std::string img;
  for (auto& f : d.files)
    if (f.name.rfind("image-", 0) == 0) img = f.name;
  std::string r = capture("ip netns exec xfer-lt1-c curl -s -o /dev/null -w '%{time_connect} %{speed_download} %{size_download}' "
                          "http://10.201.231.2:8080/" + img + " http://10.201.231.2:8080/" + img);
  double connect = 0, speed = 0, size = 0;
  ASSERT_EQ(std::sscanf(r.c_str(), "%lf %lf %lf", &connect, &speed, &size), 3) << r;
  // The path's RTT is the least of a few handshakes: on a loaded machine the
  // userspace forwarder can add a few ms to any one of them.
  for (int i = 0; i < 4; ++i) {
    double c = 0;
    if (std::sscanf(capture("ip netns exec xfer-lt1-c curl -s -o /dev/null -w '%{time_connect}' "
                            "http://10.201.231.2:8080/missing")
                        .c_str(),
                    "%lf", &c) == 1 && c > 0)
      connect = std::min(connect, c);
  }
  EXPECT_NEAR(connect * 1000, 40, 4) << "ms";  // within 10%
  double mbps = speed * 8 / 1e6;
  EXPECT_LE(mbps, 50 * 1.05);
  EXPECT_GE(mbps, 50 * 0.5);  // one TCP stream from slow start on a 2.4 MB file
  sh("bash " + std::string(XFER_SOURCE_DIR) + "/scripts/nginx-serve.sh stop " + nginx_run);
  kill(link, SIGTERM);
  int st = 0;
  waitpid(link, &st, 0);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  EXPECT_EQ(netns_list().find("xfer-lt1"), std::string::npos);
  std::ifstream f(work + "/link.out");
  std::string ready, stopped;
  std::getline(f, ready);
  std::getline(f, stopped);
  EXPECT_NE(stopped.find("\"stopped\":true"), std::string::npos) << stopped;
  fs::remove_all(work);
}

// kill -9 leaves the namespaces; the cleanup subcommand removes them.
TEST(Linkemu, CleanupRemovesWhatAKilledLinkLeft) {
  std::string work = make_temp_dir("linkemu");
  pid_t link = start_link("--name lt2 --index 232 --rate-mbps 10", work + "/link.out");
  kill(link, SIGKILL);
  waitpid(link, nullptr, 0);
  // sh -c exec'd linkemu in place, so the kill reached it.
  ASSERT_NE(netns_list().find("xfer-lt2-c"), std::string::npos);
  EXPECT_EQ(sh(bin("xfer-linkemu") + " cleanup --name lt2 > /dev/null"), 0);
  EXPECT_EQ(netns_list().find("xfer-lt2"), std::string::npos);
  fs::remove_all(work);
}

TEST(Linkemu, RefusesToStartOverAnExistingLink) {
  std::string work = make_temp_dir("linkemu");
  pid_t link = start_link("--name lt3 --index 233", work + "/a.out");
  int rc = sh(bin("xfer-linkemu") + " up --name lt3 --index 234 > /dev/null 2> " + work + "/err");
  EXPECT_EQ(rc, 1);
  std::ifstream e(work + "/err");
  std::string err((std::istreambuf_iterator<char>(e)), {});
  EXPECT_NE(err.find("exist already"), std::string::npos) << err;
  kill(link, SIGTERM);
  waitpid(link, nullptr, 0);
  EXPECT_EQ(netns_list().find("xfer-lt3"), std::string::npos);
  fs::remove_all(work);
}

// --cross START:STOP:PCT: iperf3 from the server namespace to the client one,
// paced at PCT of the rate, for STOP - START seconds. The link's own counters
// see it.
TEST(Linkemu, CrossTrafficFollowsItsSchedule) {
  std::string work = make_temp_dir("linkemu");
  // 100 Mbit/s; 40% (40 Mbit/s = 5 MB/s) from t = 0.5 s to t = 2.5 s: about 10 MB.
  int rc = sh(bin("xfer-linkemu") + " up --name lt4 --index 234 --rate-mbps 100 --rtt-ms 10 --cross 0.5:2.5:40 "
              "--duration 4 > " + work + "/out 2> " + work + "/err");
  ASSERT_EQ(rc, 0);
  std::ifstream f(work + "/out");
  std::string ready, stopped;
  std::getline(f, ready);
  std::getline(f, stopped);
  auto j = nlohmann::json::parse(stopped, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << stopped;
  double mb = j["down"]["bytes"].get<double>() / 1e6;
  EXPECT_GT(mb, 10 * 0.7) << "MB carried server -> client";
  EXPECT_LT(mb, 10 * 1.3) << "MB carried server -> client";
  EXPECT_EQ(netns_list().find("xfer-lt4"), std::string::npos);
  fs::remove_all(work);
}
