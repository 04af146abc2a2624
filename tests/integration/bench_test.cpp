// One quick xfer-bench run: the harness works and every byte verifies. It
// asserts nothing about speed (timings are not for tests).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "fixture.h"
#include "report.h"

namespace fs = std::filesystem;
using namespace xtest;

TEST(Bench, QuickWanScenarioRunsEveryClientAndVerifiesEveryByte) {
  std::string out = make_temp_dir("bench");
  std::string scenario = std::string(XFER_SOURCE_DIR) + "/tests/bench/wan.toml";
  int rc = sh(bin("xfer-bench") + " " + scenario + " --quick --index 240 --out " + out + " > " + out + "/stdout 2> " +
              out + "/stderr");
  EXPECT_EQ(rc, 0) << "see " << out << "/stderr";
  auto rows = bench::read_csv(out + "/results.csv");
  ASSERT_EQ(rows.size(), 4u * 9u);  // 4 datasets x 9 clients x 1 repeat
  std::set<std::string> clients, datasets;
  for (const auto& r : rows) {
    EXPECT_TRUE(r.verified) << r.dataset << " " << r.client << ": " << r.files_ok << "/" << r.files;
    EXPECT_EQ(r.exit_code, 0) << r.client;
    EXPECT_GT(r.bytes, 0u);
    EXPECT_GT(r.client_cpu_s, 0);
    EXPECT_NE(r.energy_source.find("model"), std::string::npos);
    clients.insert(r.client);
    datasets.insert(r.dataset);
  }
  EXPECT_EQ(clients.size(), 9u);
  std::ifstream md(out + "/summary.md");
  std::string summary((std::istreambuf_iterator<char>(md)), {});
  for (const auto& c : clients) EXPECT_NE(summary.find("| " + c + " |"), std::string::npos) << c;
  for (const auto& d : datasets) {
    std::ifstream svg(out + "/plot-" + d + ".svg");
    std::string s((std::istreambuf_iterator<char>(svg)), {});
    EXPECT_EQ(s.rfind("<svg", 0), 0u) << d;
    EXPECT_NE(s.find("</svg>"), std::string::npos);
  }
  std::ifstream lj(out + "/logs/linkemu.json");
  std::string link((std::istreambuf_iterator<char>(lj)), {});
  EXPECT_NE(link.find("\"stopped\":true"), std::string::npos) << link;
  std::string ns;
  FILE* p = popen("ip netns list", "r");
  char buf[256];
  while (p && fgets(buf, sizeof buf, p)) ns += buf;
  pclose(p);
  EXPECT_EQ(ns.find("xfer-bench240"), std::string::npos) << "namespaces left: " << ns;
  fs::remove_all(out);
}
