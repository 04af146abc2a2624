// The control loop of one job (DESIGN.md "The control loop"). Every interval:
//
//   observe  the job's bytes per chunk (Job), its TCP flows (FlowMonitor),
//            its share of the machine (Machine: energy, external load, CPU)
//            and the kernel layer, into one Observation
//   decide   Tuner::decide(observation)
//   apply    the application layer to the Job (cc, p, pp, rate cap), the
//            kernel layer to the KernelLayer (cores, frequency)
//   record   the interval: the observation plus the params chosen and why
//            (on_interval: the daemon's history, a test's hook)
//
// The loop owns the tuner, the flow accounting, the job's place in the
// machine's shares and its use of the kernel layer; the Job only transfers.
// job_report() builds the job's JSON report from both, in one place.
#pragma once

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "xfer/arbiter.h"
#include "xfer/engine.h"
#include "xfer/flow_monitor.h"
#include "xfer/interval_record.h"
#include "xfer/kernel.h"
#include "xfer/kernel_share.h"
#include "xfer/machine.h"
#include "xfer/tuner.h"

namespace xfer {

// What the loop works with besides the job and its tuner; each may be absent.
struct LoopParts {
  FlowMonitor* flows = nullptr;   // per-flow figures (the Job must have the same monitor)
  Machine* machine = nullptr;     // energy, external load, CPU: shared among the jobs
  KernelLayer* kernel = nullptr;  // cores and frequency, when this job may turn them
  uint32_t id = 1;                // the job's id in the flow monitor, the machine and the arbiter
  Arbiter* arbiter = nullptr;     // what the jobs share (the link): the job's allotment
  LinkClaim claim;               // how the arbiter sees the job (its id is `id`)
  // The layer shared by the jobs (kernel is its layer): the job asks within
  // its policy's range (kernel_range) and the most any job asks is set.
  KernelShare* kernel_share = nullptr;
  KernelLayer::Config kernel_range;
};
// The interval and the link capacity (for the external load) are the job's
// own options (EngineOptions::interval_ms, bandwidth_mbps). A tuner may ask
// for its next observation sooner (Tuner::next_look_s); every figure of an
// observation is per its own interval_s.

class ControlLoop : public JobController {
 public:
  ControlLoop(Engine& engine, Job& job, std::unique_ptr<Tuner> tuner, LoopParts parts);
  ~ControlLoop() override;
  ControlLoop(const ControlLoop&) = delete;
  ControlLoop& operator=(const ControlLoop&) = delete;

  // Params from outside the tuner (a test, a caller): applied at once, both
  // layers, and in effect for the next interval's record.
  void apply(const Params& p);

  // After each interval is recorded and the decision applied.
  std::function<void(const IntervalRecord&)> on_interval;

  const std::vector<IntervalRecord>& timeline() const { return timeline_; }
  const Tuner& tuner() const { return *tuner_; }
  const Params& params() const { return current_; }  // the tuner's, in effect now
  const Allotment& allotment() const { return allot_; }  // the arbiter's (none without one)
  const LoopParts& parts() const { return parts_; }
  // This job's joules so far (nullopt without a meter).
  std::optional<double> joules(EnergyKind k = EnergyKind::EndSystem) const;
  // The kernel layer as this job used it.
  int kernel_changes() const { return kernel_changes_; }
  const std::string& kernel_error() const { return kernel_error_; }
  // TCP payload the job's flows received (bytes fetched plus HTTP headers).
  uint64_t flow_bytes() const { return flow_bytes_; }

 private:
  Params transfer_begins(const StartFacts& info) override;
  void transfer_ends() override;
  void tick();
  IntervalRecord observe();
  void record(IntervalRecord r);
  void apply_kernel(const Params& p);
  void leave_machine();
  void leave_arbiter();
  void set_allotment(const Allotment& a);
  Params under_allotment(const Params& p) const;  // the tuner's params within the arbiter's cap
  void arm();
  uint64_t next_tick_usec() const;  // one interval, or sooner when the tuner asks (Tuner::next_look_s)

  Engine& eng_;
  Job& job_;
  std::unique_ptr<Tuner> tuner_;
  LoopParts parts_;
  Params current_;
  bool running_ = false;
  bool settling_ = false;  // the next interval begins with new cc / p / pp
  uint64_t monitor_load_ns_ = 0;  // the flow monitor's load CPU seen so far (Observation::one_off_cpu_s)
  bool left_ = false;  // the machine's shares
  bool joined_ = false;  // the arbiter's jobs
  Allotment allot_;
  std::vector<IntervalRecord> timeline_;
  uint64_t start_us_ = 0, last_us_ = 0, last_bytes_ = 0;
  std::vector<uint64_t> last_chunk_bytes_;
  FlowAccountant accountant_;
  std::vector<FlowAccountant> chunk_accountants_;
  uint64_t flow_bytes_ = 0;
  double joules_ = 0, dynamic_joules_ = 0;
  void add_energy(const Machine::Share& s);
  std::string energy_source_;
  int kernel_changes_ = 0;
  std::string kernel_error_;
  sd_event_source* tick_ = nullptr;
};

// The job's report (xferctl run --json, the daemon's stored summary): the
// Job's files, bytes, chunks and origins, and the loop's timeline, tuner,
// energy, kernel layer and flows. loop may be null (a job that never ran).
nlohmann::json job_report(const Job& job, const ControlLoop* loop);

}  // namespace xfer
