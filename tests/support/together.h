// Jobs run together in a test link's client namespace, in a child process,
// by xfer::run_job_set on the xfer::Node xferd runs its jobs on (one flow
// monitor, machine and arbiter), each started after its delay; their reports and the machine's
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
#include "xfer/job_set.h"
#include "xfer/log.h"
#include "xfer/manifest.h"

namespace xtest {

struct Planned {
  std::string manifest, algorithm;
  xfer::TunerOptions tuner;
  xfer::LinkClaim claim;
  double start_s = 0;
};

struct Together {
  double link_mbps = 0;      // the jobs' bandwidth_mbps, and the arbiter's capacity
  long interval_ms = 1000;
  bool arbiter = true;       // false: the jobs share no arbiter
  int origin_connections = 0;  // the arbiter's limit per origin over the jobs (0: none)
  bool shared_kernel = false;  // SetOptions::shared_kernel
  // Where the jobs run: this network namespace (default: the link's client
  // namespace); tag: their files' names, for sets that run at once.
  std::string ns;
  std::string tag;

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

// A set of jobs running in its child process (start_together), and where
// its result will be.
struct Started {
  pid_t pid = -1;
  std::string out;
};

// The most a set may run: a child that outlives it is hung (issue 54: one of
// two sets forked at once by two test threads stopped after two intervals,
// and ctest's timeout killed the test with its link and nginx left behind).
// SIGALRM ends the child, the test fails on its status, and the test's
// destructors tear the link down, well within ctest's 300 s.
constexpr unsigned kSetDeadlineS = 200;

// Forks the child that runs the set (from the caller's thread: start every
// set of a test from one thread, before waiting on any, never fork from
// several threads at once, since a child inherits whatever lock another
// thread held).
inline Started start_together(Link& link, const std::vector<Planned>& plan, const Together& how) {
  std::string out = link.work + "/together" + how.tag + ".json";
  std::filesystem::remove(out);
  pid_t pid = fork();
  if (pid == 0) {
    alarm(kSetDeadlineS);
    int ns = open(("/run/netns/" + (how.ns.empty() ? "xfer-" + link.name + "-c" : how.ns)).c_str(), O_RDONLY | O_CLOEXEC);
    if (ns < 0 || setns(ns, CLONE_NEWNET) != 0) _exit(3);
    if (const char* l = getenv("XFER_TEST_LOG_LEVEL")) xfer::log::set_level(l);
    xfer::EngineOptions opts;
    opts.interval_ms = how.interval_ms;
    opts.bandwidth_mbps = how.link_mbps;
    std::vector<xfer::ScheduledRun> set;
    for (size_t i = 0; i < plan.size(); ++i) {
      std::string dest = link.work + "/dest" + how.tag + "-" + std::to_string(i);
      std::filesystem::create_directories(dest);
      xfer::ScheduledRun j;
      j.spec.id = uint32_t(i + 1);
      j.spec.algorithm = plan[i].algorithm;
      j.spec.tuner = plan[i].tuner;
      j.spec.claim = plan[i].claim;
      j.spec.job = xfer::Job::Spec{xfer::parse_manifest(plan[i].manifest, "m"), dest, opts};
      j.start_s = plan[i].start_s;
      set.push_back(std::move(j));
    }
    xfer::SetOptions so;
    so.capacity_bps = how.link_mbps * 1e6;
    so.origin_connections = how.origin_connections;
    so.arbiter = how.arbiter;
    so.shared_kernel = how.shared_kernel;
    so.kernel_state = link.work + "/kernel-state" + how.tag + ".json";
    int most = 0;
    so.every_50ms = [&most] { most = std::max(most, established_to_port(8080)); };
    nlohmann::json result = xfer::run_job_set(std::move(set), so);
    result["most_connections"] = most;
    std::ofstream(out) << result.dump();
    _exit(0);
  }
  return {pid, out};
}

// Waits for a set started by start_together: xfer::run_job_set's result
// (xfer/job_set.h), and "most_connections": the most TCP connections to the
// server's port 8080 seen at once, sampled every 50 ms. A child that failed
// or was ended by its deadline gives a non-object.
inline nlohmann::json finish_together(const Started& s) {
  int st = 0;
  if (s.pid <= 0 || waitpid(s.pid, &st, 0) != s.pid) {
    ADD_FAILURE() << "the set's child could not be started or waited for";
    return nlohmann::json();
  }
  if (WIFSIGNALED(st) && WTERMSIG(st) == SIGALRM) {
    ADD_FAILURE() << "the set ran past its " << kSetDeadlineS << "-s deadline (hung) and was ended";
    return nlohmann::json();
  }
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "child status " << st;
  std::ifstream in(s.out);
  return nlohmann::json::parse(in, nullptr, false);
}

inline nlohmann::json run_together(Link& link, const std::vector<Planned>& plan, const Together& how) {
  return finish_together(start_together(link, plan, how));
}

}  // namespace xtest
