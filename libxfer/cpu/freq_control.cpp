#include <cpufreq.h>

#include <stdexcept>

#include "xfer/kernel.h"
#include "xfer/log.h"

namespace xfer {

// libcpupower reads and writes /sys/devices/system/cpu/cpuN/cpufreq/ itself;
// sys_ (same root) is for the journal and for listing CPUs. Tests bind-mount a
// fake tree over that path, so the real library code runs against it.
FreqControl::FreqControl(KernelJournal& journal, std::string sysfs_root) : journal_(journal), sys_(std::move(sysfs_root)) {}

bool FreqControl::available() const { return !driver().empty(); }

std::string FreqControl::driver() const {
  char* d = cpufreq_get_driver(0);
  if (!d) return {};
  std::string s = d;
  cpufreq_put_driver(d);
  return s;
}

bool FreqControl::limits(unsigned cpu, unsigned long* min_khz, unsigned long* max_khz) const {
  return cpufreq_get_hardware_limits(cpu, min_khz, max_khz) == 0;
}

std::vector<unsigned long> FreqControl::frequencies(unsigned cpu) const {
  std::vector<unsigned long> out;
  cpufreq_available_frequencies* f = cpufreq_get_available_frequencies(cpu);
  for (auto* p = f; p; p = p->next) out.push_back(p->frequency);
  if (f) cpufreq_put_available_frequencies(f);
  return out;
}

std::vector<std::string> FreqControl::governors(unsigned cpu) const {
  std::vector<std::string> out;
  cpufreq_available_governors* g = cpufreq_get_available_governors(cpu);
  for (auto* p = g; p; p = p->next) out.push_back(p->governor);
  if (g) cpufreq_put_available_governors(g);
  return out;
}

std::string FreqControl::set_khz(unsigned long khz) {
  if (!available()) throw std::runtime_error("no cpufreq driver: the CPU frequency cannot be set on this machine");
  std::string how;
  for (int cpu : parse_cpu_list(sys_.read("online").value_or("0"))) {
    std::string dir = "cpu" + std::to_string(cpu) + "/cpufreq/";
    if (!sys_.exists(dir + "scaling_governor")) continue;
    unsigned long lo = 0, hi = 0;
    if (limits(unsigned(cpu), &lo, &hi) && (khz < lo || khz > hi))
      throw std::runtime_error(std::to_string(khz) + " kHz is outside cpu" + std::to_string(cpu) + "'s range " +
                               std::to_string(lo) + "-" + std::to_string(hi) + " kHz");
    auto govs = governors(unsigned(cpu));
    bool userspace = std::find(govs.begin(), govs.end(), "userspace") != govs.end();
    for (const char* f : {"scaling_governor", "scaling_max_freq", "scaling_min_freq", "scaling_setspeed"})
      if (sys_.exists(dir + f)) journal_.record(sys_.path(dir + f));
    int rc;
    if (userspace) {
      rc = cpufreq_set_frequency(unsigned(cpu), khz);  // switches to userspace, writes scaling_setspeed
      how = "userspace";
    } else {
      rc = cpufreq_modify_policy_max(unsigned(cpu), khz);  // intel_pstate and friends: a cap
      how = "max-cap";
    }
    if (rc != 0)
      throw std::runtime_error("libcpupower could not set cpu" + std::to_string(cpu) + " to " + std::to_string(khz) +
                               " kHz (" + how + "): " + strerror(rc < 0 ? -rc : rc));
  }
  log::info("frequency: {} kHz on every online CPU ({})", khz, how);
  return how;
}

}  // namespace xfer
