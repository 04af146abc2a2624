#include "xfer/running_job.h"

#include <algorithm>
#include <fmt/format.h>

#include "xfer/clock.h"
#include "xfer/hla.h"
#include "xfer/log.h"
#include "xfer/manifest.h"
#include "xfer/text.h"

namespace xfer {

std::unique_ptr<KernelLayer> open_kernel_layer(const KernelLayer::Config& c, std::string* note) {
  try {
    return std::make_unique<KernelLayer>(c);
  } catch (const std::exception& e) {
    if (note) *note = std::string("kernel layer off for this job: ") + e.what();
    return nullptr;
  }
}

namespace {

// The figure when the policy's tuner takes that option; else 0.
double taken(const std::string& algorithm, const char* key, double value) {
  const TunerEntry* e = find_tuner(algorithm);
  if (!e || value <= 0) return 0;
  return std::find(e->takes.begin(), e->takes.end(), key) != e->takes.end() ? value : 0;
}

}  // namespace

double job_floor_bps(const std::string& algorithm, const TunerOptions& t) {
  return taken(algorithm, "target_mbps", t.target_mbps) * 1e6;
}

double job_ceiling_j_per_gb(const std::string& algorithm, const TunerOptions& t) {
  return taken(algorithm, "energy_budget_j_per_gb", t.energy_budget_j_per_gb);
}

std::string start_from_path(EngineOptions& o, const hla::ParamTable& t, const std::string& origin,
                            const std::string& dest_host, double now_unix) {
  const hla::PathFacts* f = hla::find_path(t, origin, dest_host);
  if (!f) return "";
  const bool link = !o.bandwidth_configured && f->link_mbps > 0, loss = f->loss_pct >= 0;
  if (!link && !loss) return "";
  o.path_link_mbps = link ? f->link_mbps : 0;
  o.path_loss_pct = loss ? f->loss_pct : -1;
  const double days = std::max(0.0, now_unix - f->newest_unix) / 86400;
  o.path_known = fmt::format("{} from the parameter table: {} run{}, the newest {}", printable(f->path), f->runs,
                             f->runs == 1 ? "" : "s",
                             days < 1 ? fmt::format("{:.0f} h ago", days * 24) : fmt::format("{:.0f} days ago", days));
  std::string what;
  if (link) what = fmt::format("link {:.0f} Mbit/s", f->link_mbps);
  if (loss) what += fmt::format("{}loss {:.3g}%", what.empty() ? "" : ", ", f->loss_pct);
  return what + " (" + o.path_known + ")";
}

std::optional<bool> interval_keeps_promise(const Observation& o, double floor_bps, double ceiling_j_per_gb) {
  if (o.settling || o.near_end || o.interval_s <= 0) return std::nullopt;
  if (floor_bps > 0) return o.throughput_bps >= floor_bps;
  if (ceiling_j_per_gb > 0) {
    if (!o.joules || o.bytes_interval == 0) return std::nullopt;
    return *o.joules / (double(o.bytes_interval) / 1e9) <= ceiling_j_per_gb;
  }
  return std::nullopt;
}

RunningJob::RunningJob(Engine& engine, RunningJobSpec spec, const SharedParts& shared) : kernel_(spec.kernel) {
  spec.tuner.kernel = spec.kernel != nullptr;
  std::unique_ptr<Tuner> tuner = make_tuner(spec.algorithm, spec.tuner);
  if (spec.tuner.hla_table && !spec.job.manifest.entries.empty()) {
    const std::string dest = spec.run.dest_host.empty() ? hla::node_name() : spec.run.dest_host;
    const std::string known = start_from_path(spec.job.opts, *spec.tuner.hla_table,
                                              url_origin(spec.job.manifest.entries.front().url), dest,
                                              unix_now());
    if (!known.empty()) log::info("job {}: its path as its earlier jobs measured it: {}", spec.id, known);
  }
  job_ = std::make_unique<Job>(engine, std::move(spec.job));
  // The monitor the Job registers its flows in is the one the loop reads.
  job_->set_log_job(spec.id);
  if (shared.flows) job_->set_flow_monitor(shared.flows, spec.id);
  if (shared.history) recorder_ = std::make_unique<hla::HistoryRecorder>(*shared.history, std::move(spec.run), *job_);
  LoopParts parts;
  parts.flows = shared.flows;
  parts.machine = shared.machine;
  parts.kernel = spec.kernel;
  parts.kernel_share = spec.kernel_share;
  parts.kernel_range = spec.kernel_range;
  parts.arbiter = shared.arbiter;
  parts.claim = spec.claim;
  parts.claim.floor_bps = job_floor_bps(spec.algorithm, spec.tuner);
  parts.claim.ceiling_j_per_gb = job_ceiling_j_per_gb(spec.algorithm, spec.tuner);
  parts.id = spec.id;
  loop_ = std::make_unique<ControlLoop>(engine, *job_, std::move(tuner), parts);
  loop_->on_interval = [this](const IntervalRecord& r) {
    if (recorder_) recorder_->interval(r);
    if (on_interval) on_interval(r);
  };
}

RunningJob::~RunningJob() {
  loop_.reset();  // the loop leaves the machine's shares and the Job's controller slot
  recorder_.reset();
  job_.reset();
}

void RunningJob::record_end(const std::string& outcome) {
  if (ended_) return;
  ended_ = true;
  if (recorder_) recorder_->finish(outcome);
}

nlohmann::json RunningJob::report() const { return job_report(*job_, loop_.get()); }

}  // namespace xfer
