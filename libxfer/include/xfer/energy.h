// EnergyMeter: joules per interval, from RAPL where the machine has it
// (libpowercap: package and dram zones of every socket), else from the
// papers' power models. Every sample says which: a model is never presented
// as a measurement.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "xfer/measures.h"
#include "xfer/sysfs.h"

namespace xfer {


struct EnergySample {
  double interval_s = 0;
  double joules = 0;          // whole machine (RAPL) or modelled load + idle over the interval
  double dynamic_joules = 0;  // joules minus idle power x interval (fasthla eq. 2)
  double watts = 0, dynamic_watts = 0;
  double total_joules = 0, total_dynamic_joules = 0;  // since the meter started
  std::string source;  // "rapl" | "model:fine" | "model:cpu"
  bool measured = false;
};

class EnergyMeter {
 public:
  virtual ~EnergyMeter() = default;
  virtual std::string source() const = 0;
  virtual bool measured() const = 0;
  // Energy since the previous call (the first call starts the clock).
  virtual EnergySample sample() = 0;
  // What the figures rest on: the RAPL zones, or the model's coefficients and where they come from.
  virtual std::string basis() const = 0;
};

// Power model coefficients (energy-aware eq. 1-3). Defaults and their origin:
// cpu_a/b/c are eq. 2's C_cpu,n = 0.011 n^2 - 0.082 n + 0.344 (watts per
// percent CPU utilisation, fitted on the paper's servers); the paper publishes
// no numbers for memory, disk and NIC, so they default to 0 (the model is then
// the CPU-only one, eq. 3) until `xferctl calibrate` fits them where RAPL
// exists.
//
// The idle (static) draw, which end-system energy adds to the dynamic part
// (energy-aware eq. 4: E_T = P_i T + P_d T_d): idle_watts for the machine as a
// whole plus idle_core_watts for every online core, so a core taken offline
// draws nothing. The papers publish no idle figure for their servers. The
// default per core assumes a server idles at half its peak draw, the figure
// of Fan, Weber and Barroso's "Power provisioning for a warehouse-sized
// computer" (the energy-aware paper's reference [17]): the machine's idle
// draw equals its modelled peak dynamic power, C_cpu,N x 100% for its N
// cores, spread over the N cores. On this 2-core machine: 11.2 W a core.
// A calibration against RAPL measures the idle draw whole (idle_watts) and
// sets idle_core_watts to 0.
struct PowerCoefficients {
  double cpu_a = 0.011, cpu_b = -0.082, cpu_c = 0.344;
  double memory = 0, disk = 0, nic = 0;  // watts per percent utilisation
  double tdp_ratio = 1.0;                // eq. 3: TDP here / TDP where fitted
  double idle_watts = 0;                 // the machine's idle draw, apart from its cores'
  double idle_core_watts = -1;           // idle draw of one online core; < 0: the default above
  std::string origin = "energy-aware-transfer-algorithms.txt eq. 2 (paper defaults)";
  std::string file;  // the file they were read from ("" : built in)

  double c_cpu(int cores) const { return cpu_a * cores * cores + cpu_b * cores + cpu_c; }
  bool fine_grained() const { return memory != 0 || disk != 0 || nic != 0; }
  // Dynamic power for utilisations in percent.
  double dynamic_watts(int cores, double u_cpu, double u_mem, double u_disk, double u_nic) const;
  // Dynamic energy of cpu_s CPU seconds spent over wall_s with n cores online
  // (eq. 3, u_cpu = cpu_s / (wall_s n) in percent): a process's own share.
  double cpu_energy_j(double cpu_s, double wall_s, int n) const;
  // The idle draw with this many cores online; the idle energy of a span of
  // wall_s with core_s online-core seconds in it; where the figure comes from.
  double idle_power_w(int online_cores) const { return idle_energy_j(online_cores, 1.0); }
  double idle_energy_j(double core_s, double wall_s) const;
  double idle_per_core_w() const;
  std::string idle_basis() const;

  static PowerCoefficients load(const std::string& path);  // throws std::runtime_error (file:line: reason)
  // The text of a coefficients file (what load reads): nesting bounded
  // (xfer/nesting.h), every key known, every value finite; throws
  // std::runtime_error naming `where`.
  static PowerCoefficients parse(std::string_view text, const std::string& where);
  void save(const std::string& path) const;
};

// The model at path: its coefficients; the paper's defaults when no file is
// there (logged, naming the path and `xferctl calibrate`). Any other problem
// (malformed, not a regular file, unreadable) throws std::runtime_error.
PowerCoefficients load_power_model(const std::string& path);

// Utilisation of the machine between two calls, from /proc and /sys.
struct Utilisation {
  double cpu = 0, memory = 0, disk = 0, nic = 0;  // percent
  int cores = 1;                                   // online CPUs
};

// Machine: /proc/stat, every CPU. Process: this process's CPU time
// (CLOCK_PROCESS_CPUTIME_ID) over the online CPUs; for test beds where the
// server and the link emulator share the machine with the client.
enum class EnergyScope { Machine, Process };

class UtilisationProbe {
 public:
  explicit UtilisationProbe(std::string proc = "/proc", std::string sys = "/sys", double nic_capacity_mbps = 1000,
                            EnergyScope scope = EnergyScope::Machine);
  Utilisation sample();
  EnergyScope scope() const { return scope_; }

 private:
  EnergyScope scope_;
  uint64_t proc_cpu_ns_ = 0;
  std::string proc_, sys_;
  double nic_mbps_;
  uint64_t busy_ = 0, total_ = 0, io_ms_ = 0, net_bytes_ = 0;
  uint64_t last_ns_ = 0;
};

class ModelMeter : public EnergyMeter {
 public:
  ModelMeter(PowerCoefficients c, std::unique_ptr<UtilisationProbe> probe);
  std::string source() const override;
  bool measured() const override { return false; }
  EnergySample sample() override;
  std::string basis() const override {
    return "power model, coefficients " +
           (coef_.file.empty() ? "built in: " + coef_.origin : "from " + coef_.file + " (" + coef_.origin + ")") +
           "; idle " + coef_.idle_basis();
  }

 private:
  PowerCoefficients coef_;
  std::unique_ptr<UtilisationProbe> probe_;
  uint64_t last_ns_ = 0;
  double total_ = 0, total_dyn_ = 0;
};

// RAPL counters through libpowercap. Throws std::runtime_error from the
// constructor when the machine has none (the caller falls back, and says so).
class RaplMeter : public EnergyMeter {
 public:
  explicit RaplMeter(double idle_watts = 0);
  ~RaplMeter() override;
  std::string source() const override { return "rapl"; }
  bool measured() const override { return true; }
  EnergySample sample() override;
  std::string basis() const override { return "RAPL counters, " + std::to_string(zones_.size()) + " zones"; }
  size_t zones() const { return zones_.size(); }

  // Energy between two readings of a counter that wraps at max_uj.
  static uint64_t delta_uj(uint64_t prev, uint64_t now, uint64_t max_uj);

 private:
  struct Zone;
  std::vector<std::unique_ptr<Zone>> zones_;
  double idle_w_;
  uint64_t last_ns_ = 0;
  double total_ = 0, total_dyn_ = 0;
};

// RAPL when it works, else the model; logs which, and why. The scope applies
// to the model (RAPL measures the package whatever the scope).
std::unique_ptr<EnergyMeter> make_energy_meter(const PowerCoefficients& c, EnergyScope scope = EnergyScope::Machine);

// How energy measured over a stretch of time is divided among what ran in it
// (a job's chunks; the jobs on a machine): by what each one's bytes and
// connections cost, from a model fitted over the stretches seen so far,
// energy = a x bytes + b x connection-seconds (least squares through the
// origin; the caller gives the dynamic energy where there is one). Until the
// fit is determined (kMinSamples samples, the two not collinear, a and b >=
// 0) the split is by bytes alone: many connections then cost nothing, which
// is what a split by bytes says; and with no bytes at all, equal shares.
class EnergySplit {
 public:
  static constexpr int kMinSamples = 4;
  // forget: the weight an earlier sample keeps at each new one (1: all
  // alike; a daemon's machine forgets, as what its jobs cost changes).
  explicit EnergySplit(double forget = 1.0) : forget_(forget) {}
  // One stretch: its joules, and each part's bytes and connection-seconds.
  void add(double joules, const std::vector<double>& bytes, const std::vector<double>& conn_s);
  // Each part's share (summing to 1) of a stretch of these.
  std::vector<double> shares(const std::vector<double>& bytes, const std::vector<double>& conn_s) const;
  bool fitted() const;
  double per_byte() const { return a_; }
  double per_connection_s() const { return b_; }
  // How the last shares were made, for reports: the fitted costs, or bytes
  // and why (a split by bytes is the fallback, and says so).
  std::string basis() const;

 private:
  double forget_ = 1.0;
  double s11_ = 0, s12_ = 0, s22_ = 0, s1y_ = 0, s2y_ = 0, a_ = 0, b_ = 0;
  int n_ = 0;
};

// Calibration: least squares (Eigen) of measured power against
//   P = (a n^2 + b n + c) u_cpu + m u_mem + d u_disk + k u_nic + idle
struct CalibrationSample {
  int cores = 1;
  double u_cpu = 0, u_mem = 0, u_disk = 0, u_nic = 0;
  double watts = 0;  // measured (RAPL)
};
// Fits the coefficients; cores must vary across samples for a, b, c to be
// identified (when they do not, a = b = 0 and c carries it). Throws
// std::invalid_argument when the samples cannot determine the model.
PowerCoefficients fit_power_model(const std::vector<CalibrationSample>& samples);

}  // namespace xfer
