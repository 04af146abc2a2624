#include "cross.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fmt/format.h>
#include <stdexcept>
#include <thread>

namespace linkemu {

CrossSpec parse_cross(const std::string& s) {
  CrossSpec c;
  if (std::sscanf(s.c_str(), "%lf:%lf:%lf", &c.start_s, &c.stop_s, &c.pct) != 3 || c.stop_s <= c.start_s ||
      c.pct <= 0 || c.start_s < 0)
    throw std::invalid_argument("cross traffic '" + s + "': expected START_S:STOP_S:PERCENT, e.g. 20:40:40");
  return c;
}

CrossTraffic::CrossTraffic(std::string client_ns, std::string server_ns, std::string server_ip, double link_mbps,
                           std::vector<CrossSpec> flows, int base_port)
    : client_ns_(std::move(client_ns)),
      server_ns_(std::move(server_ns)),
      server_ip_(std::move(server_ip)),
      link_mbps_(link_mbps),
      flows_(std::move(flows)),
      base_port_(base_port) {}

CrossTraffic::~CrossTraffic() { stop(); }

pid_t CrossTraffic::spawn(const std::vector<std::string>& args) {
  pid_t pid = fork();
  if (pid == 0) {
    sigset_t all;
    sigfillset(&all);
    sigprocmask(SIG_UNBLOCK, &all, nullptr);
    int null = open("/dev/null", O_RDWR);
    dup2(null, 0);
    dup2(null, 1);
    dup2(null, 2);
    std::vector<char*> av;
    for (auto& a : args) av.push_back(const_cast<char*>(a.c_str()));
    av.push_back(nullptr);
    execvp(av[0], av.data());
    _exit(127);
  }
  if (pid > 0) pids_.push_back(pid);
  return pid;
}

void CrossTraffic::start() {
  stop();
  started_.assign(flows_.size(), false);
  for (size_t i = 0; i < flows_.size(); ++i)
    spawn({"ip", "netns", "exec", server_ns_, "iperf3", "-s", "-p", std::to_string(base_port_ + i)});
  if (!flows_.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(300));  // servers listening
  t0_ = std::chrono::steady_clock::now();
}

void CrossTraffic::poll() {
  double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  for (size_t i = 0; i < flows_.size(); ++i) {
    if (started_[i] || t < flows_[i].start_s) continue;
    started_[i] = true;
    const CrossSpec& f = flows_[i];
    spawn({"ip", "netns", "exec", client_ns_, "iperf3", "-c", server_ip_, "-p", std::to_string(base_port_ + i),
           "-R", "-b", fmt::format("{:.0f}M", link_mbps_ * f.pct / 100), "-t", fmt::format("{:.1f}", f.stop_s - f.start_s)});
  }
  // Reap only what it started: the caller may be waiting for children of its own.
  for (pid_t& p : pids_)
    if (p > 0 && waitpid(p, nullptr, WNOHANG) == p) p = -1;
}

void CrossTraffic::stop() {
  // `ip netns exec` execs iperf3 in place: the pid is iperf3's.
  for (pid_t p : pids_)
    if (p > 0) kill(p, SIGTERM);
  for (pid_t p : pids_)
    if (p > 0) waitpid(p, nullptr, 0);
  pids_.clear();
}

}  // namespace linkemu
