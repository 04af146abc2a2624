// Jobs run together in a test link's client namespace, in a child process,
// on one flow monitor and machine (and an arbiter, when asked) as xferd has
// them: each started after its delay; their reports and the machine's
// figures come back as JSON.
#pragma once

#include <fcntl.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "link.h"
#include "xfer/arbiter.h"
#include "xfer/flow_monitor.h"
#include "xfer/kernel_share.h"
#include "xfer/machine.h"
#include "xfer/manifest.h"
#include "xfer/running_job.h"

namespace xtest {

struct Planned {
  std::string manifest, algorithm;
  xfer::TunerOptions tuner;
  xfer::ArbiterJob claim;
  double start_s = 0;
};

struct Together {
  double link_mbps = 0;      // the jobs' bandwidth_mbps, and the arbiter's capacity
  long interval_ms = 1000;
  bool arbiter = true;       // false: the jobs share no arbiter
  int origin_connections = 0;  // the arbiter's limit per origin over the jobs (0: none)
  // One kernel layer for all the jobs, in affinity mode (the child's own
  // threads: nothing of the machine changes), shared as xferd shares it.
  bool shared_kernel = false;
};

// TCP connections established from this network namespace to remote port
// `port` (IPv4, /proc/self/net/tcp).
inline int established_to_port(int port) {
  std::ifstream in("/proc/self/net/tcp");
  std::string line;
  std::getline(in, line);
  int n = 0;
  char want[8];
  std::snprintf(want, sizeof want, ":%04X", port);
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::string sl, local, remote, st;
    f >> sl >> local >> remote >> st;
    n += st == "01" && remote.size() > 5 && remote.substr(remote.size() - 5) == want;
  }
  return n;
}

// {"jobs": [report...], "machine_joules": J, "source": the meter's,
//  "most_connections": the most TCP connections to the server's port 8080
//  seen at once, sampled every 50 ms}.
inline nlohmann::json run_together(Link& link, const std::vector<Planned>& plan, const Together& how) {
  std::string out = link.work + "/together.json";
  pid_t pid = fork();
  if (pid == 0) {
    int ns = open(("/run/netns/xfer-" + link.name + "-c").c_str(), O_RDONLY | O_CLOEXEC);
    if (ns < 0 || setns(ns, CLONE_NEWNET) != 0) _exit(3);
    nlohmann::json result;
    sd_event* ev = nullptr;
    sd_event_new(&ev);
    {
      xfer::Engine engine(ev);
      auto flows = xfer::make_flow_monitor(true);
      auto machine = xfer::make_machine({}, xfer::EnergyScope::Machine);
      xfer::ArbiterConfig ac;
      ac.capacity_bps = how.link_mbps * 1e6;
      ac.origin_connections = how.origin_connections;
      xfer::Arbiter arbiter(ac);
      xfer::KernelLayer::Config kc;
      kc.mode = xfer::CoreControl::Mode::Affinity;
      kc.state_file = link.work + "/kernel-state.json";
      std::string note;
      std::unique_ptr<xfer::KernelLayer> layer = how.shared_kernel ? xfer::open_kernel_layer(kc, &note) : nullptr;
      std::unique_ptr<xfer::KernelShare> share = layer ? std::make_unique<xfer::KernelShare>(*layer) : nullptr;
      if (how.shared_kernel && !layer) result["kernel_note"] = note;
      xfer::EngineOptions opts;
      opts.interval_ms = how.interval_ms;
      opts.bandwidth_mbps = how.link_mbps;
      std::vector<std::unique_ptr<xfer::RunningJob>> jobs;
      std::vector<sd_event_source*> timers;
      int running = int(plan.size());
      for (size_t i = 0; i < plan.size(); ++i) {
        std::string dest = link.work + "/dest" + std::to_string(i);
        std::filesystem::create_directories(dest);
        xfer::RunningJobSpec spec;
        spec.id = uint32_t(i + 1);
        spec.algorithm = plan[i].algorithm;
        spec.tuner = plan[i].tuner;
        spec.claim = plan[i].claim;
        spec.kernel = layer.get();
        spec.kernel_share = share.get();
        spec.kernel_range = kc;
        spec.job = xfer::Job::Spec{xfer::parse_manifest(plan[i].manifest, "m"), dest, opts};
        jobs.push_back(std::make_unique<xfer::RunningJob>(
            engine, std::move(spec),
            xfer::SharedParts{flows.get(), machine.get(), nullptr, how.arbiter ? &arbiter : nullptr}));
        jobs.back()->job().on_finished = [&] {
          if (--running == 0) sd_event_exit(ev, 0);
        };
        sd_event_source* t = nullptr;
        sd_event_add_time_relative(
            ev, &t, CLOCK_MONOTONIC, uint64_t(plan[i].start_s * 1e6) + 1, 1000,
            [](sd_event_source*, uint64_t, void* ud) {
              static_cast<xfer::RunningJob*>(ud)->start();
              return 0;
            },
            jobs.back().get());
        timers.push_back(t);
      }
      int most = 0;
      sd_event_source* sampler = nullptr;
      sd_event_add_time_relative(
          ev, &sampler, CLOCK_MONOTONIC, 50000, 1000,
          [](sd_event_source* s, uint64_t, void* ud) {
            int& m = *static_cast<int*>(ud);
            m = std::max(m, established_to_port(8080));
            sd_event_source_set_time_relative(s, 50000);
            sd_event_source_set_enabled(s, SD_EVENT_ON);
            return 0;
          },
          &most);
      sd_event_loop(ev);
      sd_event_source_unref(sampler);
      result["most_connections"] = most;
      for (auto& j : jobs) result["jobs"].push_back(j->report());
      result["machine_joules"] = machine->joules_shared();
      result["source"] = machine->meter() ? machine->meter()->source() : "none";
      for (sd_event_source* t : timers) sd_event_source_unref(t);
      jobs.clear();
      share.reset();
      layer.reset();
    }
    sd_event_unref(ev);
    std::ofstream(out) << result.dump();
    _exit(0);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "child status " << st;
  std::ifstream in(out);
  return nlohmann::json::parse(in, nullptr, false);
}

}  // namespace xtest
