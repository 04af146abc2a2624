#include "xfer/control_loop.h"

#include <algorithm>
#include <fmt/format.h>

#include "xfer/kernel_knobs.h"
#include "xfer/log.h"

namespace xfer {

ControlLoop::ControlLoop(Engine& engine, Job& job, std::unique_ptr<Tuner> tuner, LoopParts parts)
    : eng_(engine), job_(job), tuner_(std::move(tuner)), parts_(parts) {
  job_.set_controller(this);
  if (Machine* m = parts_.machine) {
    // The share basis: what the job fetched. (Its flows' counters are read
    // once per interval by the accountant below; the machine samples at
    // every job's interval.)
    // The cost basis beside the bytes: the connections its channels hold
    // (cc x p of each chunk still running).
    m->join(parts_.id, [&j = job_] { return j.progress().bytes_fetched; },
            [&j = job_] {
              double n = 0;
              for (const ChunkStatus& c : j.chunks())
                if (!c.finished) n += double(std::max(1, c.params.cc) * std::max(1, c.params.p));
              return n;
            });
    if (m->meter()) energy_source_ = m->meter()->source();
  }
}

ControlLoop::~ControlLoop() {
  if (tick_) sd_event_source_disable_unref(tick_);
  job_.set_controller(nullptr);
  leave_machine();
  leave_arbiter();
}

void ControlLoop::leave_arbiter() {
  if (parts_.kernel_share) parts_.kernel_share->leave(parts_.id);  // the others' asks are set
  if (parts_.arbiter && joined_) parts_.arbiter->leave(parts_.id);
  joined_ = false;
}

Params ControlLoop::under_allotment(const Params& p) const {
  if (allot_.cap_bps <= 0 || (p.rate_cap_bps > 0 && p.rate_cap_bps <= allot_.cap_bps)) return p;
  Params q = p;
  q.rate_cap_bps = allot_.cap_bps;
  q.reason = (p.reason.empty() ? "" : p.reason + "; ") + "arbiter: " + allot_.reason;
  return q;
}

// The arbiter's new allotment reaches the Job at once, under the params the
// tuner chose last.
void ControlLoop::set_allotment(const Allotment& a) {
  log::JobScope scope(parts_.id);  // another job's interval may have divided the link
  // A cap put on (an alert for an operator: the job no longer moves as
  // fast as it can), and lifted.
  if (a.cap_bps > 0 && allot_.cap_bps <= 0)
    log::event(log::msg::kArbiterCap, spdlog::level::info, "arbiter: capped at {:.1f} Mbit/s: {}", a.cap_bps / 1e6,
               a.reason);
  else if (a.cap_bps <= 0 && allot_.cap_bps > 0)
    log::info("arbiter: cap lifted: {}", a.reason);
  if (a.connections != allot_.connections) job_.limit_connections(a.connections);
  allot_ = a;
  if (running_ && !current_.chunks.empty()) job_.apply(under_allotment(current_));
}

std::optional<double> ControlLoop::joules(EnergyKind k) const {
  if (!parts_.machine || !parts_.machine->meter()) return std::nullopt;
  return k == EnergyKind::Dynamic ? dynamic_joules_ : joules_;
}

void ControlLoop::add_energy(const Machine::Share& s) {
  if (s.joules) joules_ += *s.joules;
  if (s.dynamic_joules) dynamic_joules_ += *s.dynamic_joules;
}

Params ControlLoop::transfer_begins(const StartFacts& info) {
  StartFacts i = info;
  if (parts_.kernel)
    i.kernel = parts_.kernel_share ? parts_.kernel_share->caps_for(parts_.kernel_range) : parts_.kernel->caps();
  last_us_ = eng_.now_us();
  JobProgress p = job_.progress();
  last_bytes_ = p.bytes_fetched;
  last_chunk_bytes_.assign(info.chunks.size(), 0);
  chunk_accountants_.assign(info.chunks.size(), FlowAccountant());
  if (parts_.machine) {
    // Discovery's share counts in the job's total, not in its first interval.
    Machine::Share s = parts_.machine->take(parts_.id);
    add_energy(s);
  }
  running_ = true;
  settling_ = true;  // the first interval is the set-up
  if (parts_.arbiter) {
    LinkClaim claim = parts_.claim;
    claim.id = parts_.id;
    claim.origins = info.origins;
    joined_ = true;
    parts_.arbiter->join(claim, [this](const Allotment& a) { set_allotment(a); });
  }
  Params first = tuner_->init(i);
  arm();
  apply_kernel(first);
  current_ = first;
  return under_allotment(first);  // the Job applies the application layer
}

void ControlLoop::transfer_ends() {
  if (!running_) return;
  // The tail of the transfer since the last interval; then the job leaves
  // the machine's shares (a finished job draws nothing).
  // Shorter than 50 ms, it is recorded only when it moved bytes (every byte
  // is in exactly one interval).
  if (eng_.now_us() - last_us_ > 50000 || job_.progress().bytes_fetched > last_bytes_) record(observe());
  leave_machine();
  leave_arbiter();
  running_ = false;
  if (tick_) sd_event_source_set_enabled(tick_, SD_EVENT_OFF);
}

void ControlLoop::leave_machine() {
  if (!parts_.machine || left_) return;
  Machine::Share s = parts_.machine->leave(parts_.id);  // what came since the last interval
  add_energy(s);
  left_ = true;
}

uint64_t ControlLoop::next_tick_usec() const {
  uint64_t interval = uint64_t(job_.options().interval_ms) * 1000;
  std::optional<double> look = tuner_->next_look_s();
  if (!look) return interval;
  return std::clamp<uint64_t>(uint64_t(std::max(0.0, *look) * 1e6), std::min<uint64_t>(100000, interval), interval);
}

void ControlLoop::arm() {
  uint64_t usec = next_tick_usec();
  if (!tick_) {
    sd_event_add_time_relative(
        eng_.loop(), &tick_, CLOCK_MONOTONIC, usec, 1000,
        [](sd_event_source* s, uint64_t, void* ud) {
          auto* self = static_cast<ControlLoop*>(ud);
          self->tick();
          if (self->running_) {
            sd_event_source_set_time_relative(s, self->next_tick_usec());
            sd_event_source_set_enabled(s, SD_EVENT_ON);
          }
          return 0;
        },
        this);
  } else {
    sd_event_source_set_time_relative(tick_, usec);
  }
  sd_event_source_set_enabled(tick_, SD_EVENT_ON);
}

void ControlLoop::tick() {
  log::JobScope scope(parts_.id);
  JobState st = job_.state();
  if (!running_ || (st != JobState::Running && st != JobState::Paused)) return;
  // Other processes' load since the last interval may want a core back (or let one go).
  if (parts_.kernel && st == JobState::Running) parts_.kernel->keep_up();
  IntervalRecord r = observe();
  if (st == JobState::Running) {
    r.decided = tuner_->decide(r.obs);
    if (r.decided) apply(*r.decided);
  }
  const double moved = st == JobState::Running ? r.obs.throughput_bps : 0;
  const double jpg = r.obs.joules && r.obs.bytes_interval > 0 ? *r.obs.joules / (double(r.obs.bytes_interval) / 1e9) : 0;
  // The connections its params ask for over the chunks still running.
  int wanted = 0;
  for (size_t i = 0; i < current_.chunks.size() && i < r.obs.chunks.size(); ++i)
    if (!r.obs.chunks[i].finished) wanted += std::max(1, current_.chunks[i].cc) * std::max(1, current_.chunks[i].p);
  const double rtt_ms = r.obs.flow && r.obs.flow->bytes > 0 ? r.obs.flow->rtt_ms : 0;
  record(std::move(r));
  // Last: the arbiter may give every job (this one too) a new allotment.
  if (parts_.arbiter && joined_) parts_.arbiter->observe(parts_.id, moved, wanted, jpg, rtt_ms);
}

void ControlLoop::record(IntervalRecord r) {
  timeline_.push_back(std::move(r));
  if (on_interval) on_interval(timeline_.back());
}

IntervalRecord ControlLoop::observe() {
  uint64_t now = eng_.now_us();
  double dt = std::max(1e-6, double(now - last_us_) / 1e6);
  IntervalRecord r;
  r.progress = job_.progress();
  job_.new_interval();
  const JobProgress& p = r.progress;
  Observation& o = r.obs;
  o.t_s = p.seconds;
  o.interval_s = dt;
  o.bytes_interval = p.bytes_fetched - last_bytes_;
  o.throughput_bps = double(o.bytes_interval) * 8 / dt;
  o.bytes_done = p.bytes_done;
  o.bytes_total = p.bytes_total;
  // Two control intervals, whatever this observation's own span (a tuner's
  // quick look is shorter).
  const double interval_s = double(job_.options().interval_ms) / 1e3;
  o.near_end = p.bytes_total > p.bytes_done &&
               double(p.bytes_total - p.bytes_done) < 2 * interval_s * double(o.bytes_interval) / dt;
  o.params = current_;
  o.allotted_bps = allot_.cap_bps;
  o.settling = settling_;
  settling_ = false;
  r.chunks = job_.chunks();
  const std::vector<ChunkStatus>& chunks = r.chunks;
  last_chunk_bytes_.resize(chunks.size(), 0);
  for (size_t i = 0; i < chunks.size(); ++i) {
    const ChunkStatus& c = chunks[i];
    ChunkObservation co;
    co.kind = c.kind;
    co.params = c.params;
    co.bytes_total = c.bytes_total;
    co.bytes_done = c.bytes_done;
    co.files_total = c.files_total;
    co.files_done = c.files_done;
    co.throughput_bps = double(c.bytes_fetched - last_chunk_bytes_[i]) * 8 / dt;
    co.finished = c.finished;
    last_chunk_bytes_[i] = c.bytes_fetched;
    o.chunks.push_back(co);
  }
  if (parts_.flows) {
    std::vector<FlowCounters> all = parts_.flows->flows(parts_.id);
    o.flow = accountant_.interval(all, dt);
    flow_bytes_ += o.flow->bytes;
    std::vector<std::vector<FlowCounters>> by_chunk(chunks.size());
    for (const FlowCounters& f : all) {
      std::optional<size_t> c = job_.chunk_of_flow(f.id);
      if (!c) continue;
      if (*c < by_chunk.size()) by_chunk[*c].push_back(f);
      if (f.closed) job_.forget_flow(f.id);
    }
    chunk_accountants_.resize(chunks.size());
    for (size_t i = 0; i < chunks.size(); ++i) o.chunks[i].flow = chunk_accountants_[i].interval(by_chunk[i], dt);
    const uint64_t load_ns = parts_.flows->load_ns();
    if (load_ns > monitor_load_ns_) o.one_off_cpu_s = double(load_ns - monitor_load_ns_) / 1e9;
    monitor_load_ns_ = load_ns;
  }
  if (parts_.machine) {
    Machine::Share s = parts_.machine->take(parts_.id);
    if (s.joules) {
      o.joules = *s.joules;
      o.dynamic_joules = s.dynamic_joules;
      add_energy(s);
      o.energy_source = energy_source_;
    }
    // External load is a share of the link: the configured rate, else the
    // most the interfaces were seen to receive (at least what this
    // interval's own and external bytes came to).
    double link_bps = job_.options().bandwidth_mbps * 1e6;
    if (!job_.options().bandwidth_configured && s.external_bytes) {
      double now_bps = o.throughput_bps + double(*s.external_bytes) * 8 / dt;
      link_bps = std::max(s.link_bps.value_or(0), now_bps);
    }
    if (s.external_bytes && link_bps > 0) {
      o.link_bps = link_bps;
      o.ext_load = std::clamp(double(*s.external_bytes) * 8 / dt / link_bps, 0.0, 1.0);
    }
    o.cpu_pct = s.cpu_pct;
  }
  if (KernelLayer* k = parts_.kernel) {
    Params set = k->in_effect();
    for (const KernelKnobDef& d : kernel_knobs())
      if (long v = d.get(set); v > 0) d.observe(o, v);
  }
  last_us_ = now;
  last_bytes_ = p.bytes_fetched;
  return r;
}

void ControlLoop::apply_kernel(const Params& p) {
  KernelLayer* k = parts_.kernel;
  if (!k || !kernel_differs(p, current_) || describe_kernel(p).empty()) return;
  std::string err = parts_.kernel_share ? parts_.kernel_share->ask(parts_.id, parts_.claim.cls, p.cores, p.freq_khz)
                                        : k->apply(p);
  if (!err.empty()) kernel_error_ = err;
  ++kernel_changes_;
  // Shared, the layer logs what it sets (the most any job asks); alone, this is what is set.
  if (parts_.kernel_share)
    log::info("kernel: asks {} ({})", describe_kernel(p), p.reason);
  else
    log::event(log::msg::kKernelChanged, spdlog::level::info, "kernel: {} ({}) ({})", describe_kernel(k->in_effect()),
               k->mode_name(), p.reason);
}

void ControlLoop::apply(const Params& p) {
  apply_kernel(p);
  if (p.chunks != current_.chunks) settling_ = true;
  current_ = p;
  job_.apply(under_allotment(p));
}

}  // namespace xfer
