// The papers' power models (energy-aware-transfer-algorithms.txt §2.2):
//   P_t = C_cpu,n u_cpu + C_memory u_memory + C_disk u_disk + C_nic u_nic   (eq. 1)
//   C_cpu,n = 0.011 n^2 - 0.082 n + 0.344                                    (eq. 2)
//   P_t = C_cpu,n u_cpu TDP_SR / TDP_SL                                      (eq. 3)
// Utilisations in percent. The model predicts the power of the load (no
// constant term); the idle draw of the online cores (and idle_watts) is
// added for the end-system figure (eq. 4).
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>

#include <fstream>
#include <sstream>
#include <fmt/format.h>
#include <toml++/toml.h>

#include "xfer/proc_stat.h"
#include "xfer/nesting.h"
#include "xfer/clock.h"
#include "xfer/energy.h"
#include "xfer/log.h"
#include "xfer/safe_open.h"

namespace xfer {
double PowerCoefficients::dynamic_watts(int cores, double u_cpu, double u_mem, double u_disk, double u_nic) const {
  return c_cpu(cores) * u_cpu * tdp_ratio + memory * u_mem + disk * u_disk + nic * u_nic;
}

double PowerCoefficients::cpu_energy_j(double cpu_s, double wall_s, int n) const {
  if (wall_s <= 0 || n <= 0) return 0;
  double u_cpu = 100.0 * cpu_s / (wall_s * n);
  return std::max(0.0, c_cpu(n)) * u_cpu * tdp_ratio * wall_s;
}

namespace {
int cores_present() { return std::max(1, int(sysconf(_SC_NPROCESSORS_CONF))); }
}  // namespace

double PowerCoefficients::idle_per_core_w() const {
  if (idle_core_watts >= 0) return idle_core_watts;
  int n = cores_present();
  return std::max(0.0, c_cpu(n)) * 100.0 * tdp_ratio / n;
}

double PowerCoefficients::idle_energy_j(double core_s, double wall_s) const {
  return idle_watts * wall_s + idle_per_core_w() * std::max(0.0, core_s);
}

std::string PowerCoefficients::idle_basis() const {
  std::string per_core = fmt::format("{:.2f} W per online core", idle_per_core_w());
  if (idle_core_watts < 0)
    per_core += fmt::format(" (assumed: idle at half of peak, Fan et al. 2007 as cited by energy-aware [17]; "
                            "C_cpu,{0} x 100% over {0} cores)", cores_present());
  return idle_watts != 0 ? fmt::format("{:.2f} W + {}", idle_watts, per_core) : per_core;
}

PowerCoefficients PowerCoefficients::load(const std::string& path) {
  PowerCoefficients c = parse(read_trusted_file(path, 64 * 1024, "power model file"), path);
  c.file = path;
  return c;
}

PowerCoefficients PowerCoefficients::parse(std::string_view text, const std::string& path) {
  toml::table t;
  try {
    check_toml_nesting(text, path);
    t = toml::parse(text, path);
  } catch (const toml::parse_error& e) {
    throw std::runtime_error(path + ":" + std::to_string(e.source().begin.line) + ": " + std::string(e.description()));
  }
  PowerCoefficients c;
  std::string fitted;
  for (auto&& [k, v] : t) {
    std::string key(k.str());
    double* field = key == "cpu_a" ? &c.cpu_a : key == "cpu_b" ? &c.cpu_b : key == "cpu_c" ? &c.cpu_c
                  : key == "memory" ? &c.memory : key == "disk" ? &c.disk : key == "nic" ? &c.nic
                  : key == "tdp_ratio" ? &c.tdp_ratio : key == "idle_watts" ? &c.idle_watts
                  : key == "idle_core_watts" ? &c.idle_core_watts : nullptr;
    if (key == "origin") {
      fitted = v.value_or(std::string());
      continue;
    }
    if (!field) throw std::runtime_error(path + ":" + std::to_string(v.source().begin.line) + ": unknown key '" + key + "'");
    auto d = v.value<double>();
    if (!d || !std::isfinite(*d))
      throw std::runtime_error(path + ":" + std::to_string(v.source().begin.line) + ": '" + key + "' must be a finite number");
    *field = *d;
  }
  c.origin = fitted;
  return c;
}

PowerCoefficients load_power_model(const std::string& path) {
  struct stat st;
  if (!path.empty() && lstat(path.c_str(), &st) != 0 && errno == ENOENT) {
    PowerCoefficients c;
    log::warn("energy: no power model at {}; the model uses the paper's coefficients ({}). `xferctl calibrate` fits "
              "one to this machine where RAPL exists", path, c.origin);
    return c;
  }
  if (path.empty()) return {};
  return PowerCoefficients::load(path);
}

void PowerCoefficients::save(const std::string& path) const {
  std::ofstream f(path);
  f << "# xferd power model (energy-aware-transfer-algorithms.txt eq. 1-3), watts per percent utilisation.\n"
    << "# C_cpu,n = cpu_a n^2 + cpu_b n + cpu_c for n online cores.\n"
    << "origin = \"" << origin << "\"\n"
    << "cpu_a = " << cpu_a << "\ncpu_b = " << cpu_b << "\ncpu_c = " << cpu_c << "\nmemory = " << memory
    << "\ndisk = " << disk << "\nnic = " << nic << "\ntdp_ratio = " << tdp_ratio << "\nidle_watts = " << idle_watts << "\n";
  if (idle_core_watts >= 0) f << "idle_core_watts = " << idle_core_watts << "\n";
  else f << "# idle_core_watts: not set, so the default (half of peak; see xfer/energy.h)\n";
  if (!f) throw std::runtime_error("cannot write " + path);
}

UtilisationProbe::UtilisationProbe(std::string proc, std::string sys, double nic_capacity_mbps, EnergyScope scope)
    : scope_(scope), proc_(std::move(proc)), sys_(std::move(sys)), nic_mbps_(nic_capacity_mbps) {
  sample();  // prime the counters
}

Utilisation UtilisationProbe::sample() {
  Utilisation u;
  uint64_t now = monotonic_ns();
  double dt = last_ns_ ? double(now - last_ns_) / 1e9 : 0;
  last_ns_ = now;
  {
    CpuTimes t = read_cpu_times(proc_);
    if (t.total > total_) u.cpu = 100.0 * double(t.busy - busy_) / double(t.total - total_);
    busy_ = t.busy, total_ = t.total;
  }
  {  // memory in use
    std::ifstream f(proc_ + "/meminfo");
    std::string k;
    uint64_t v, total = 0, avail = 0;
    std::string unit;
    while (f >> k >> v) {
      if (k == "MemTotal:") total = v;
      if (k == "MemAvailable:") avail = v;
      std::getline(f, unit);
    }
    if (total) u.memory = 100.0 * double(total - avail) / double(total);
  }
  {  // disks: busiest device's share of time doing I/O (diskstats field 13, ms)
    std::ifstream f(proc_ + "/diskstats");
    std::string line;
    uint64_t io = 0;
    while (std::getline(f, line)) {
      std::istringstream in(line);
      std::string major, minor, name;
      in >> major >> minor >> name;
      if (name.rfind("loop", 0) == 0 || name.rfind("ram", 0) == 0) continue;
      uint64_t x[10] = {0};
      for (auto& y : x) in >> y;
      io = std::max(io, x[9]);
    }
    if (dt > 0 && io >= io_ms_) u.disk = std::min(100.0, double(io - io_ms_) / (dt * 10));
    io_ms_ = io;
  }
  {  // NICs (not lo): bytes both ways over the configured capacity
    SysFs net(sys_ + "/class/net");
    uint64_t bytes = 0;
    for (const auto& dev : net.list("")) {
      if (dev == "lo") continue;
      bytes += uint64_t(net.read_int(dev + "/statistics/rx_bytes").value_or(0));
      bytes += uint64_t(net.read_int(dev + "/statistics/tx_bytes").value_or(0));
    }
    if (dt > 0 && bytes >= net_bytes_) u.nic = std::min(100.0, double(bytes - net_bytes_) * 8 / dt / (nic_mbps_ * 1e6) * 100);
    net_bytes_ = bytes;
  }
  u.cores = int(parse_cpu_list(SysFs(sys_ + "/devices/system/cpu").read("online").value_or("0")).size());
  if (scope_ == EnergyScope::Process) {
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    uint64_t ns = uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
    // Over the machine's online CPUs, as for the whole machine: the model's
    // n is the cores that draw power, and confining this process to fewer
    // (affinity) leaves the others powered.
    u.cpu = dt > 0 && proc_cpu_ns_ ? 100.0 * double(ns - proc_cpu_ns_) / 1e9 / (dt * std::max(1, u.cores)) : 0;
    proc_cpu_ns_ = ns;
  }
  return u;
}

ModelMeter::ModelMeter(PowerCoefficients c, std::unique_ptr<UtilisationProbe> probe)
    : coef_(std::move(c)), probe_(std::move(probe)), last_ns_(monotonic_ns()) {}

std::string ModelMeter::source() const {
  std::string s = coef_.fine_grained() ? "model:fine" : "model:cpu";
  return probe_->scope() == EnergyScope::Process ? s + ":process" : s;
}

EnergySample ModelMeter::sample() {
  EnergySample s;
  uint64_t now = monotonic_ns();
  s.interval_s = double(now - last_ns_) / 1e9;
  last_ns_ = now;
  Utilisation u = probe_->sample();
  s.dynamic_watts = coef_.dynamic_watts(u.cores, u.cpu, u.memory, u.disk, u.nic);
  s.watts = s.dynamic_watts + coef_.idle_power_w(u.cores);
  s.dynamic_joules = s.dynamic_watts * s.interval_s;
  s.joules = s.watts * s.interval_s;
  total_ += s.joules, total_dyn_ += s.dynamic_joules;
  s.total_joules = total_, s.total_dynamic_joules = total_dyn_;
  s.source = source();
  s.measured = false;
  return s;
}

}  // namespace xfer
