// control/machine.cpp with real jobs: what is machine-wide (energy,
// interface bytes) is measured once and shared among the jobs that run at
// once, over xfer-linkemu.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "fixture.h"
#include "link.h"
#include "together.h"
#include "xfer/flow_monitor.h"
#include "xfer/machine.h"
#include "xfer/stats.h"
#include "xfer/manifest.h"
#include "xfer/running_job.h"

namespace fs = std::filesystem;
using namespace xtest;


// Two jobs at once over one 200 Mbit/s link, on one Machine as the daemon
// has it: neither sees the other's traffic as external load, and their
// joules add up to what the machine's meter counted while they ran (each is
// charged its share, not the whole machine). Run in a child that enters the
// link's client namespace.
TEST(SharedMachine, TwoConcurrentJobsAreChargedTheirShareOnly) {
  Dataset d = dataset(20, 4, 1, 0.5);
  Link link("fm2", 249, "--rate-mbps 200 --rtt-ms 10 --queue-bytes 262144", d);
  ASSERT_TRUE(link.nginx_ok);
  Dataset video;
  for (auto& f : d.files)
    if (f.name.rfind("video-", 0) == 0) video.files.push_back(f), video.bytes += f.size;
  ASSERT_EQ(video.files.size(), 1u);
  std::string manifest = video.manifest("http://" + link.server_ip + ":8080/");
  Planned job{manifest, "static", {}, {}, 0};
  job.tuner.fixed = xfer::ChunkParams{1, 1, 1};
  nlohmann::json r = run_together(link, {job, job}, Together{200, 500, false});
  ASSERT_TRUE(r.is_object());
  ASSERT_EQ(r["jobs"].size(), 2u);
  double sum = 0;
  for (const auto& j : r["jobs"]) {
    ASSERT_EQ(j["state"], "done") << j.dump(1);
    EXPECT_EQ(j["bytes_fetched"].get<uint64_t>(), video.bytes);
    std::vector<double> ext;
    for (const auto& e : j["timeline"])
      if (e.contains("ext_load")) ext.push_back(e["ext_load"].get<double>());
    ASSERT_GE(ext.size(), 6u);
    double m = xfer::median(ext);
    double joules = j["energy"]["joules"].get<double>();
    std::printf("job: %zu intervals, external load median %.3f (the other job's traffic is not external), %.2f J (%s)\n",
                ext.size(), m, joules, j["energy"]["source"].get<std::string>().c_str());
    EXPECT_LT(m, 0.05);
    EXPECT_GT(joules, 0);
    sum += joules;
  }
  double machine = r["machine_joules"].get<double>();
  std::printf("jobs' joules %.3f J, the machine's meter while they ran %.3f J\n", sum, machine);
  EXPECT_NEAR(sum, machine, 1e-6 * machine);
}
