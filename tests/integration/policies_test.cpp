// Every SLA policy over xfer-linkemu (issue 6): xferctl run --sla POLICY in
// the link's client namespace completes a mixed dataset byte-identical, and
// says in its timeline why it chose what it chose, kernel layer included.
// The hla policies run twice: on a cold start, and from a parameter table
// whose strata are this link's and this dataset's chunks (issue 15).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "fixture.h"
#include "xfer/hla.h"
#include "xfer/partition.h"

namespace fs = std::filesystem;
using namespace xtest;

namespace {

struct PolicyLink {
  std::string work, nginx_run;
  pid_t pid = -1;
  PolicyLink(const Dataset& d) : work(make_temp_dir("policies")), nginx_run(work + "/nginx") {
    pid = start_link("--name pt1 --index 236 --rate-mbps 100 --rtt-ms 20", work + "/link.out");
    if (sh("ip netns exec xfer-pt1-s bash " + std::string(XFER_SOURCE_DIR) + "/scripts/nginx-serve.sh start " +
           nginx_run + " " + d.dir + " 8080 8081 2m 10.201.236.2") != 0)
      ADD_FAILURE() << "nginx did not start";
  }
  ~PolicyLink() {
    sh("bash " + std::string(XFER_SOURCE_DIR) + "/scripts/nginx-serve.sh stop " + nginx_run + " > /dev/null 2>&1");
    if (pid > 0) {
      kill(pid, SIGTERM);
      waitpid(pid, nullptr, 0);
    }
    fs::remove_all(work);
  }
};

// Each chunk kind's params in the table below: distinct, so the test tells
// which stratum a chunk started from.
const xfer::hla::Knobs kTableKnobs[] = {{3, 1, 4, 2, 0}, {2, 2, 1, 2, 0}, {1, 3, 1, 1, 0}};

// A table as xfer-hla analyze writes one, for this link (100 Mbit/s, 20 ms)
// and this dataset: a stratum per chunk of the dataset as xferctl
// partitions it at the link's BDP (P1/D1: small, D2: medium, D3: large),
// with a throughput and an energy entry each. The runs give xferctl the
// RTT (--rtt-ms 20), so its BDP is this one: a measured RTT a little off
// moves images near the Large bound between chunks, and the chunks' shapes
// with them.
void write_table(const Dataset& d, const std::string& path) {
  std::vector<uint64_t> sizes;
  for (const auto& f : d.files) sizes.push_back(f.size);
  xfer::PartitionConfig cfg;
  cfg.bdp_bytes = uint64_t(std::ceil(100e6 / 8 * (20 / 1e3)));  // as the job computes it
  xfer::hla::ParamTable t;
  t.generated_unix = double(time(nullptr));
  t.history = "policies_test";
  for (const xfer::ChunkPlan& c : xfer::partition_files(sizes, cfg)) {
    xfer::hla::TableStratum s;
    s.id = "P1/D" + std::to_string(int(c.kind) + 1) + "/L1";
    s.link_mbps = 100, s.rtt_ms = 20;
    s.files = double(c.files.size()), s.bytes = double(c.bytes), s.size_mean = c.avg_size(), s.size_sd = c.size_sd;
    s.rows = 24;
    xfer::hla::Choice ch{kTableKnobs[int(c.kind)], 80, 60, true};
    s.entries.push_back({"throughput", 1.0, 80, ch});
    s.entries.push_back({"energy", 1.0, 60, ch});
    t.strata.push_back(s);
  }
  xfer::hla::save_table(t, path);
}

}  // namespace

TEST(Policies, EveryPolicyCompletesAMixedDatasetOverTheLink) {
  Dataset d = dataset(40, 4, 1, 0.1);  // 40 html, 4 images, one 22 MB video
  PolicyLink link(d);
  std::string online_before = capture("cat /sys/devices/system/cpu/online");
  std::ofstream(link.work + "/manifest") << d.manifest("http://10.201.236.2:8081/");
  write_table(d, link.work + "/table.json");
  const std::string table = " --max-channels 12 --rtt-ms 20 --hla-table " + link.work + "/table.json";
  struct Case {
    std::string name, args;
    bool table = false;  // name is POLICY+table
  };
  const std::vector<Case> cases = {
      {"static", "--sla static --cc 4 --pp 4"},
      {"min-energy", "--sla min-energy"},
      {"max-throughput", "--sla max-throughput --max-channels 12"},
      {"energy-efficient", "--sla energy-efficient --search-step 4 --max-channels 12"},
      {"throughput-target", "--sla throughput-target --target-mbps 40"},
      // No --hla-table: a cold start on the heuristic, reported as such.
      {"hla-throughput", "--sla hla-throughput --target-mbps 40"},
      {"hla-energy", "--sla hla-energy"},
      {"hla-throughput+table", "--sla hla-throughput --target-mbps 40" + table, true},
      {"hla-energy+table", "--sla hla-energy" + table, true},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    std::string dest = link.work + "/dest-" + c.name;
    fs::create_directories(dest);
    std::string out = capture("ip netns exec xfer-pt1-c " + bin("xferctl") + " run --manifest " + link.work +
                              "/manifest --dest " + dest + " --bandwidth-mbps 100 --interval-ms 500 --json --no-progress"
                              " --kernel affinity --kernel-state " + link.work + "/kstate.json --energy-scope process " +
                              c.args + " 2> " + link.work + "/" + c.name + ".err");
    auto j = nlohmann::json::parse(out, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << out;
    EXPECT_EQ(j["state"], "done");
    EXPECT_EQ(j["policy"], c.name.substr(0, c.name.find('+')));
    EXPECT_EQ(j["files_ok"].get<size_t>(), d.files.size());
    expect_identical(d, dest);
    expect_no_partials(dest);
    // Every interval has its reason, its energy and its cores; the energy is
    // the model and says so.
    ASSERT_FALSE(j["timeline"].empty());
    for (const auto& e : j["timeline"]) {
      EXPECT_FALSE(e["reason"].get<std::string>().empty());
      EXPECT_TRUE(e.contains("joules"));
      EXPECT_GE(e["cores"].get<int>(), 1);
    }
    EXPECT_EQ(j["energy"]["source"], "model:cpu:process");
    EXPECT_FALSE(j["energy"]["measured"].get<bool>());
    EXPECT_GT(j["energy"]["joules"].get<double>(), 0);
    EXPECT_EQ(j["kernel"]["mode"], "affinity");
    EXPECT_FALSE(j["kernel"].contains("error")) << j["kernel"].dump();
    const auto& t = j["tuner"];
    if (c.name == "max-throughput") {
      EXPECT_EQ(t["kernel"]["cores"].get<int>(), j["kernel"]["cores"].get<int>());  // all of them
    } else if (c.name == "energy-efficient") {
      EXPECT_GE(t["chosen"].get<int>(), 1);
      EXPECT_FALSE(t["scores"].empty());
    } else if (c.name == "throughput-target") {
      EXPECT_DOUBLE_EQ(t["target_mbps"].get<double>(), 40);
      EXPECT_TRUE(t.contains("deviation_pct"));
    } else if (c.table) {
      // Every chunk started from its own stratum, with that stratum's params.
      EXPECT_EQ(t["start"], "table") << t.dump();
      ASSERT_EQ(t["chunks"].size(), j["timeline"][0]["params"].size()) << t.dump();
      ASSERT_GE(t["chunks"].size(), 2u) << t.dump();  // a mixed dataset: more than one chunk
      for (size_t i = 0; i < t["chunks"].size(); ++i) {
        std::string kind = t["chunks"][i]["kind"];
        int k = kind == "small" ? 0 : kind == "medium" ? 1 : 2;
        EXPECT_EQ(t["chunks"][i]["source"], "table P1/D" + std::to_string(k + 1) + "/L1") << t.dump();
        const auto& first = j["timeline"][0]["params"][i];
        EXPECT_EQ(first["chunk"], kind);
        EXPECT_EQ(first["cc"].get<int>(), kTableKnobs[k].cc) << first.dump();
        EXPECT_EQ(first["p"].get<int>(), kTableKnobs[k].p) << first.dump();
        EXPECT_EQ(first["pp"].get<int>(), kTableKnobs[k].pp) << first.dump();
      }
      EXPECT_NE(j["timeline"][0]["reason"].get<std::string>().find("from P1/D"), std::string::npos)
          << j["timeline"][0]["reason"];
    } else if (c.name.rfind("hla-", 0) == 0) {
      EXPECT_EQ(t["start"], "cold") << t.dump();
      EXPECT_EQ(t["heuristic"], c.name == "hla-energy" ? "min-energy" : "throughput-target") << t.dump();
      EXPECT_NE(j["timeline"][0]["reason"].get<std::string>().find("cold start"), std::string::npos);
    }
  }
  // affinity touches only the process; the machine's CPUs are as they were,
  // and the journal is gone (restored on exit).
  EXPECT_EQ(capture("cat /sys/devices/system/cpu/online"), online_before);
  EXPECT_FALSE(fs::exists(link.work + "/kstate.json"));
}

// Bad policy arguments: a clear error, exit 2, nothing fetched.
TEST(Policies, BadArgumentsAreRefused) {
  std::string work = make_temp_dir("policies-args");
  std::ofstream(work + "/m") << "http://127.0.0.1:9/x 10\n";
  auto run = [&](const std::string& args) {
    return sh(bin("xferctl") + " run --manifest " + work + "/m --dest " + work + " --kernel off " + args + " 2> " +
              work + "/err > /dev/null");
  };
  auto err = [&] { return capture("cat " + work + "/err"); };
  EXPECT_EQ(run("--sla throughput-target"), 2);
  EXPECT_NE(err().find("needs target_mbps or target_pct"), std::string::npos) << err();
  EXPECT_EQ(run("--sla min-energy --target-mbps 10"), 2);
  EXPECT_EQ(run("--sla throughput-target --target-mbps 10 --target-pct 50"), 2);
  EXPECT_EQ(run("--sla max-throughput --cores 1"), 2);
  EXPECT_EQ(run("--sla warp"), 2);
  EXPECT_NE(err().find("known: static, min-energy, max-throughput, energy-efficient, throughput-target"),
            std::string::npos)
      << err();
  EXPECT_FALSE(fs::exists(work + "/x"));
  fs::remove_all(work);
}
