// One running job as every front end runs it (xferd, xferctl run, the test
// fixture): the Job, the ControlLoop that tunes it, and its rows in the
// transfer history, wired once and torn down in reverse order.
//
//   RunningJob run(engine, std::move(spec), shared);
//   run.on_interval = ...;   // after the history row, with progress and chunks
//   run.job().on_finished = ...;
//   run.start();
//   ...                      // the event loop
//   run.record_end("done");  // the run's outcome in the history, once
//
// What is machine-wide (flow monitor, machine, history) belongs to the front
// end and outlives its jobs; the kernel layer is lent to a job in its spec.
#pragma once

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "xfer/control_loop.h"
#include "xfer/engine.h"
#include "xfer/history.h"
#include "xfer/kernel.h"
#include "xfer/tuner.h"

namespace xfer {

// Shared among the front end's jobs; each may be absent.
struct SharedParts {
  FlowMonitor* flows = nullptr;
  Machine* machine = nullptr;
  hla::History* history = nullptr;
  Arbiter* arbiter = nullptr;  // the link among the jobs (xfer/arbiter.h)
};

struct RunningJobSpec {
  uint32_t id = 1;  // the job's id in the flow monitor and the machine
  Job::Spec job;
  std::string algorithm;  // the tuner (tuner_registry)
  TunerOptions tuner;     // tuner.kernel follows `kernel` below
  KernelLayer* kernel = nullptr;  // lent to this job: it may turn cores and frequency
  // Or shared with the other jobs (kernel is then share's layer): it asks
  // within its policy's range (xfer/kernel_share.h).
  KernelShare* kernel_share = nullptr;
  KernelLayer::Config kernel_range;
  // How the arbiter sees the job (class, user, weight); its floor is the
  // tuner's target_mbps when the policy takes one (a throughput floor).
  LinkClaim claim;
  // The job's run in the history (tool, job id, policy, label...): recorded
  // when SharedParts::history is set.
  hla::RunRow run;
};

// The kernel layer for a job, or null with *note saying why it is off (its
// journal is someone else's, the knobs are missing...): the job then tunes
// the application layer only, as the note says.
std::unique_ptr<KernelLayer> open_kernel_layer(const KernelLayer::Config& c, std::string* note);

// The throughput a job with this policy is promised (bits/s): its absolute
// target when the policy takes one (throughput-target, hla-throughput); 0:
// none (a target in percent of the measured maximum is no figure to set
// aside).
double job_floor_bps(const std::string& algorithm, const TunerOptions& t);
// The energy per GB a job with this policy is promised not to exceed: its
// energy_budget_j_per_gb when the policy takes one (hla-energy); 0: none.
double job_ceiling_j_per_gb(const std::string& algorithm, const TunerOptions& t);

// A job starts from its path (issue 55): the table's record of the path
// from `origin` to `dest_host` (hla::find_path) fills o's path_* where no
// link rate or loss is configured. What was set, for the log ("": nothing,
// the table does not know the path or everything is configured).
std::string start_from_path(EngineOptions& o, const hla::ParamTable& t, const std::string& origin,
                            const std::string& dest_host, double now_unix);

// Whether one interval kept a job's promise: its floor (it moved at least
// floor_bps) or its ceiling (it spent at most ceiling_j_per_gb per GB it
// moved). nullopt when the job has no promise or the interval says nothing
// of it: the interval began with new cc / p / pp (settling, as the tuners
// read it), the job was ending (what was left took less than the interval
// could carry), or a ceiling's interval had no energy figure or no bytes.
std::optional<bool> interval_keeps_promise(const Observation& o, double floor_bps, double ceiling_j_per_gb);

class RunningJob {
 public:
  // Throws what make_tuner (an unknown algorithm: std::invalid_argument) and
  // the Job (an unusable destination) throw; nothing is left half-built.
  RunningJob(Engine& engine, RunningJobSpec spec, const SharedParts& shared);
  ~RunningJob();  // the loop, then the recorder, then the Job
  RunningJob(const RunningJob&) = delete;
  RunningJob& operator=(const RunningJob&) = delete;

  Job& job() { return *job_; }
  const Job& job() const { return *job_; }
  ControlLoop& loop() { return *loop_; }
  const ControlLoop& loop() const { return *loop_; }
  bool holds_kernel() const { return kernel_; }

  // Every interval, after its history row: the record carries what its
  // readers need (observation, decision, progress, chunk status).
  std::function<void(const IntervalRecord&)> on_interval;

  void start() { job_->start(); }
  // The run's end in the history (done | failed | cancelled | interrupted);
  // a second call changes nothing.
  void record_end(const std::string& outcome);
  // The job's report (xfer::job_report).
  nlohmann::json report() const;

 private:
  std::unique_ptr<Job> job_;
  std::unique_ptr<hla::HistoryRecorder> recorder_;
  std::unique_ptr<ControlLoop> loop_;
  bool kernel_ = false;
  bool ended_ = false;
};

}  // namespace xfer
