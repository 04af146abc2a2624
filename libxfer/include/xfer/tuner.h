// The Tuner interface (DESIGN.md "Tuners") and its registry. One file per
// algorithm under libxfer/tune/, each with its formula and paper reference.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "xfer/params.h"
#include "xfer/partition.h"

namespace xfer {

// What a tuner knows about the job before it starts.
struct JobInfo {
  std::vector<ChunkPlan> chunks;
  uint64_t bdp_bytes = 0;
  double bandwidth_bps = 0;  // link rate (bits/s), configured or assumed
  double rtt_s = 0;          // measured at discovery (TCP handshake) or configured
  uint64_t tcp_buf_bytes = 0;  // largest TCP receive buffer (net.ipv4.tcp_rmem max)
  int max_channels = 32;       // cap on channels (sum of cc over chunks); each opens p connections
  KernelCaps kernel;
};

struct ChunkObservation {
  ChunkKind kind = ChunkKind::Small;
  ChunkParams params;
  uint64_t bytes_total = 0, bytes_done = 0;
  size_t files_total = 0, files_done = 0;
  double throughput_bps = 0;  // bits/s over the last interval
  bool finished = false;
};

// One control interval's measurements.
struct Observation {
  double t_s = 0;
  double interval_s = 0;
  double throughput_bps = 0;  // bits/s, whole job, last interval
  uint64_t bytes_done = 0, bytes_total = 0;
  uint64_t bytes_interval = 0;  // fetched in this interval
  std::vector<ChunkObservation> chunks;
  // Energy over the interval (EnergyMeter): measured (RAPL) or modelled, as
  // the source says; 0 joules when the job has no meter.
  double joules = 0;
  std::string energy_source;
  int cores = 0;            // online (or allowed) cores during the interval
  long freq_khz = 0;        // set frequency, 0 when not controlled
  bool near_end = false;    // what is left would take under two intervals at this rate
};

struct TunerOptions {
  std::optional<ChunkParams> fixed;  // static: the caller's cc / p / pp
  int fixed_cores = 0;               // static: the caller's cores (0: leave alone)
  long fixed_freq_khz = 0;           // static: the caller's frequency (0: leave alone)
  double target_mbps = 0;            // throughput-target: absolute target
  double target_pct = 0;             // throughput-target: percent of the measured maximum
  int search_step = 0;               // energy-efficient: cc step (0: the policy's default)
  std::vector<int> search_levels;    // energy-efficient: explicit levels (overrides the step)
  bool kernel = true;                // tune cores / frequency when the job can
};

class Tuner {
 public:
  virtual ~Tuner() = default;
  virtual std::string name() const = 0;
  virtual Params init(const JobInfo& info) = 0;
  // Called every interval; nullopt keeps the current params.
  virtual std::optional<Params> decide(const Observation& obs) = 0;
  virtual nlohmann::json summary() const { return nlohmann::json::object(); }
};

// The registry: every SLA policy name and its algorithm.
struct TunerEntry {
  std::string name;
  std::string description;
  std::function<std::unique_ptr<Tuner>(const TunerOptions&)> make;
};
const std::vector<TunerEntry>& tuner_registry();
// Throws std::invalid_argument naming the known policies.
std::unique_ptr<Tuner> make_tuner(const std::string& name, const TunerOptions& opts);

}  // namespace xfer
