// The Tuner interface (DESIGN.md "Tuners") and its registry. One file per
// algorithm under libxfer/tune/, each with its formula and paper reference.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "xfer/measures.h"
#include "xfer/params.h"

namespace xfer {

namespace hla {
struct ParamTable;
}

// What a tuner knows about the job and its path when it starts.
struct StartFacts {
  std::vector<ChunkPlan> chunks;
  uint64_t bdp_bytes = 0;
  double bandwidth_bps = 0;  // link rate (bits/s): configured, the path's as measured before, or assumed
  bool link_configured = false;  // else bandwidth_bps is not a configured figure and Observation::link_bps the measure
  bool link_from_path = false;   // bandwidth_bps is the path's rate as its earlier jobs measured it (EngineOptions)
  double rtt_s = 0;          // measured at discovery (TCP handshake) or configured
  double loss_pct = -1;      // the path's packet loss as configured (--loss-pct), else as measured before; -1: not known
  // The loss its earlier jobs measured (-1: none): the scale the parameter
  // table's strata sit on (hla::path_facts), looked up by it before a
  // configured figure.
  double path_loss_pct = -1;
  uint64_t tcp_buf_bytes = 0;  // largest TCP receive buffer (net.ipv4.tcp_rmem max)
  int max_channels = 32;       // cap on channels (sum of cc over chunks); each opens p connections
  // Every origin speaks HTTP/2: a connection with pp > 1 carries pp requests
  // at once (streams), where HTTP/1.1 answers them one after another.
  bool multiplexed = false;
  std::vector<std::string> origins;  // scheme://host:port of its files
  KernelCaps kernel;
};

// One chunk over one control interval.
struct ChunkObservation {
  ChunkKind kind = ChunkKind::Small;
  ChunkParams params;  // in effect during the interval
  uint64_t bytes_total = 0, bytes_done = 0;
  size_t files_total = 0, files_done = 0;
  double throughput_bps = 0;  // application bytes, bits/s over the interval
  bool finished = false;
  std::optional<FlowInterval> flow;  // its TCP flows, when the job has a FlowMonitor
  uint64_t bytes_left() const { return bytes_total - std::min(bytes_total, bytes_done); }
  size_t files_left() const { return files_total - std::min(files_total, files_done); }  // in flight or queued
};

// One control interval: everything the loop measured, what every tuner sees
// and what the timeline and the history keep (control_loop.h). A figure the
// job has no source for is missing (nullopt), never a zero.
struct Observation {
  double t_s = 0;         // since the job started
  double interval_s = 0;
  double throughput_bps = 0;  // application bytes, bits/s, whole job
  uint64_t bytes_done = 0, bytes_total = 0;
  uint64_t bytes_interval = 0;  // fetched in this interval
  uint64_t bytes_left() const { return bytes_total - std::min(bytes_total, bytes_done); }
  Params params;                // in effect during the interval, with the reason they were chosen
  std::vector<ChunkObservation> chunks;
  std::optional<FlowInterval> flow;  // the job's TCP flows (FlowMonitor)
  // Traffic on the interfaces that is not any xferd job's, as a share of the
  // link capacity (0..1): machine-wide, shared among the jobs (machine.h).
  std::optional<double> ext_load;
  std::optional<double> cpu_pct;  // the machine's CPU utilisation, percent of the online CPUs
  // The link rate ext_load is a share of: the configured one, else the most
  // the interfaces were seen to receive (Machine); missing: neither.
  std::optional<double> link_bps;
  // This job's share of the machine's energy over the interval (machine.h
  // says how it is divided), measured or modelled as energy_source says.
  std::optional<double> joules;
  std::optional<double> dynamic_joules;  // of it, above the idle draw
  std::string energy_source;
  // The energy a policy minimises: joules (end-system) or dynamic_joules.
  std::optional<double> energy(EnergyKind k) const { return k == EnergyKind::Dynamic ? dynamic_joules : joules; }
  std::optional<int> cores;        // online (or allowed) cores, when the job holds the kernel layer
  std::optional<long> freq_khz;    // the frequency set, when the job controls it
  // The rate cap the arbiter allotted the job for the interval (many jobs on
  // one machine, xfer/arbiter.h), under which the tuner decides; 0: none.
  double allotted_bps = 0;
  bool near_end = false;  // what is left would take under two control intervals at this rate
  // The interval began with new cc / p / pp (or is the job's first): it holds
  // the change itself, connections opening or draining and slow start, so it
  // measures the change, not the params. (A rate cap or the kernel layer
  // changes no connection.) Set once, by the control loop, for every tuner.
  bool settling = false;
  // CPU seconds this interval spent on one-off work of the measuring, no
  // setting's: the flow monitor loading its BPF programs (about 60 ms, a
  // process-scope look's whole energy again) while the job ran. A tuner
  // judges no setting on such a look's energy; the job's totals keep it.
  double one_off_cpu_s = 0;
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
  // sweep: the points to visit in turn (cc, p, pp, cores; cores 0: leave
  // alone), each held for sweep_hold intervals (the first one settles).
  std::vector<std::array<int, 4>> sweep_points;
  int sweep_hold = 3;
  // hla-energy / hla-throughput: the parameter table (null: none loaded, a
  // cold start on the heuristics) and the energy SLA (J/GB; 0: least energy).
  // hla-throughput's SLA is target_mbps / target_pct (0: most throughput).
  std::shared_ptr<const hla::ParamTable> hla_table;
  double energy_budget_j_per_gb = 0;
  // The most of a job's intervals spent exploring (HlaTuner::kExploreShare
  // is the default; 0: none).
  double explore_share = 0.1;
  // max-throughput: Falcon's cost per stream K (> 1): the channels are
  // searched online for the most utility T / K^n rather than all
  // max_channels; 0: off.
  double stream_cost = 0;
};

class Tuner {
 public:
  virtual ~Tuner() = default;
  virtual std::string name() const = 0;
  // The energy the policy minimises (nullopt: none; it maximises throughput
  // or holds what it is given). The reports say which.
  virtual std::optional<EnergyKind> minimises() const { return std::nullopt; }
  virtual Params init(const StartFacts& info) = 0;
  // Called every interval; nullopt keeps the current params.
  virtual std::optional<Params> decide(const Observation& obs) = 0;
  // When the tuner wants its next observation sooner than one interval
  // (seconds; nullopt: at the interval). Asked after init and after every
  // decide; the loop keeps it between 0.1 s and the interval.
  virtual std::optional<double> next_look_s() const { return std::nullopt; }
  virtual nlohmann::json summary() const { return nlohmann::json::object(); }
};

// The registry: every SLA policy name, its algorithm, and which options go
// with it (in the way aria2 tags its options): the option checks, the
// config and GetPolicies read these, so a new policy is one entry here.
struct TunerEntry {
  std::string name;
  std::string description;
  std::function<std::unique_ptr<Tuner>(const TunerOptions&)> make;
  // Options of its own (rows of option_table()): an option that some entry
  // takes is refused for every policy that does not take it.
  std::vector<std::string> takes = {};
  // Groups of options of which it needs one each ({"target_mbps", "target_pct"}).
  std::vector<std::vector<std::string>> needs = {};
  // What its own options do, said when another policy is given one.
  std::string takes_note = {};
  // Non-empty: xferd.conf may not define a policy of it, and why.
  std::string run_only = {};
};
const std::vector<TunerEntry>& tuner_registry();
const TunerEntry* find_tuner(const std::string& name);
// "" or what the algorithm still needs of the options given ("needs
// target_mbps or target_pct").
std::string tuner_needs_problem(const std::string& algorithm, const nlohmann::json& given);
// Throws std::invalid_argument naming the known policies.
std::unique_ptr<Tuner> make_tuner(const std::string& name, const TunerOptions& opts);

}  // namespace xfer
