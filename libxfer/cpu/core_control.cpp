#include <errno.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <stdexcept>

#include "xfer/kernel.h"
#include "xfer/log.h"

namespace xfer {

CoreControl::CoreControl(Config cfg, KernelJournal& journal)
    : cfg_(std::move(cfg)), journal_(journal), sys_(cfg_.sysfs_root) {
  if (cfg_.min_cores < 1) cfg_.min_cores = 1;
  if (cfg_.allowed.empty())
    for (int c : parse_cpu_list(sys_.read("present").value_or("0")))
      if (c != 0) cfg_.allowed.push_back(c);
  std::erase(cfg_.allowed, 0);  // cpu0 is never taken offline
  CPU_ZERO(&started_with_);
  if (sched_getaffinity(0, sizeof started_with_, &started_with_) != 0) CPU_ZERO(&started_with_);
}

int CoreControl::present() const { return int(parse_cpu_list(sys_.read("present").value_or("0")).size()); }

std::vector<int> CoreControl::online_list() const {
  if (cfg_.mode == Mode::Affinity) {
    cpu_set_t set;
    CPU_ZERO(&set);
    sched_getaffinity(0, sizeof set, &set);
    std::vector<int> out;
    for (int i = 0; i < CPU_SETSIZE; ++i)
      if (CPU_ISSET(i, &set)) out.push_back(i);
    return out;
  }
  return parse_cpu_list(sys_.read("online").value_or("0"));
}

int CoreControl::online() const { return int(online_list().size()); }

void CoreControl::set_online(int n) {
  int have = present();
  if (n < cfg_.min_cores)
    throw std::invalid_argument(std::to_string(n) + " cores requested, below the configured minimum of " +
                                std::to_string(cfg_.min_cores));
  if (n > have) throw std::invalid_argument(std::to_string(n) + " cores requested, only " + std::to_string(have) + " exist");
  // cpu0 plus the allowed CPUs are all this class may ever have online by choice.
  int reachable_min = have - int(cfg_.allowed.size());
  if (n < reachable_min)
    throw std::invalid_argument(std::to_string(n) + " cores requested, but only CPUs " + std::to_string(cfg_.allowed.size()) +
                                " may be taken offline (the rest, cpu0 included, stay online)");

  if (cfg_.mode == Mode::Affinity) {
    confine(n);
    log::info("cores: this process confined to {} CPUs (affinity)", n);
    return;
  }

  std::vector<int> on = online_list();
  // Offline the highest-numbered allowed CPUs first; online the lowest first.
  std::vector<int> allowed = cfg_.allowed;
  std::sort(allowed.begin(), allowed.end());
  int count = int(on.size());
  for (auto it = allowed.rbegin(); it != allowed.rend() && count > n; ++it) {
    if (std::find(on.begin(), on.end(), *it) == on.end()) continue;
    std::string rel = "cpu" + std::to_string(*it) + "/online";
    journal_.record(sys_.path(rel));
    sys_.write(rel, "0");
    --count;
  }
  for (int c : allowed) {
    if (count >= n) break;
    if (std::find(on.begin(), on.end(), c) != on.end()) continue;
    std::string rel = "cpu" + std::to_string(c) + "/online";
    journal_.record(sys_.path(rel));
    sys_.write(rel, "1");
    ++count;
  }
  log::info("cores: {} online (hotplug)", count);
}

void CoreControl::confine(int n) {
  const bool known = CPU_COUNT(&started_with_) > 0;
  cpu_set_t set = started_with_;
  if (n > 0 || !known) {
    CPU_ZERO(&set);
    int k = 0;
    for (int c : parse_cpu_list(sys_.read("online").value_or("0"))) {
      if (n > 0 && k >= n) break;
      if (c < CPU_SETSIZE && (!known || CPU_ISSET(c, &started_with_))) CPU_SET(c, &set), ++k;
    }
    if (k == 0) CPU_SET(0, &set);
  }
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/task")) {
    pid_t tid = pid_t(std::stoi(e.path().filename().string()));
    // A thread that ended after the listing (curl's resolver threads come
    // and go) has nothing left to confine: ESRCH is not an error.
    if (sched_setaffinity(tid, sizeof set, &set) != 0 && errno != ESRCH)
      throw std::runtime_error("sched_setaffinity(" + std::to_string(tid) + "): " + strerror(errno));
  }
}

}  // namespace xfer
