#include "kernel_plan.h"

#include "xfer/kernel_knobs.h"

#include <algorithm>
#include <fmt/format.h>

namespace xfer::tune {

int KernelPlan::cores_for(int channels, const KernelCaps& caps) {
  int n = (std::max(1, channels) + kChannelsPerCore - 1) / kChannelsPerCore;
  return std::clamp(n, std::max(1, caps.min_cores), std::max(1, caps.cores_present));
}

namespace {

// Where a goal starts each knob of the table (xfer/kernel_knobs.h): a
// level, or <= 0 for the top. A knob without a rule here starts at the top.
long start_of(const KernelKnobDef& d, const KernelCaps& c, KernelPlan::Goal g, int channels) {
  if (std::string(d.name) != "cores") return 0;
  return g == KernelPlan::Goal::Raise   ? c.cores_present
         : g == KernelPlan::Goal::Least ? std::max(1, c.min_cores)
                                        : KernelPlan::cores_for(channels, c);
}

const KernelKnobDef& def_of(const KernelKnob& k) {
  for (const KernelKnobDef& d : kernel_knobs())
    if (k.name == d.name) return d;
  return kernel_knobs().front();  // not reached: every knob is made from a row
}

// The index of the level nearest v.
int nearest(const std::vector<long>& levels, long v) {
  int best = 0;
  for (size_t i = 1; i < levels.size(); ++i)
    if (std::labs(levels[i] - v) < std::labs(levels[size_t(best)] - v)) best = int(i);
  return best;
}

}  // namespace

KernelKnob* KernelPlan::knob(const char* name) {
  for (KernelKnob& k : knobs_)
    if (k.name == name) return &k;
  return nullptr;
}

void KernelPlan::put(Params& p) const {
  for (const KernelKnobDef& d : kernel_knobs()) d.set(p, 0);
  if (!enabled_) return;
  for (const KernelKnob& k : knobs_) def_of(k).set(p, k.value());
}

bool KernelPlan::at_top() const {
  for (const KernelKnob& k : knobs_)
    if (!k.at_top()) return false;
  return true;
}

KernelStep KernelPlan::changed(KernelStep::Kind kind, const KernelKnob& k, std::string reason, Params& p) {
  put(p);
  ++changes_;
  return {kind, k.name, k.value(), std::move(reason)};
}

std::string KernelPlan::init(const KernelCaps& caps, bool enabled, Goal goal, int channels, Params& p) {
  caps_ = caps;
  goal_ = goal;
  knobs_.clear();
  probe_ = -1;
  for (const KernelKnobDef& d : kernel_knobs()) {
    KernelKnob k{d.name, d.unit, d.levels(caps)};
    if (k.levels.empty()) continue;
    long start = start_of(d, caps, goal, channels);
    k.index = goal == Goal::Hold ? -1 : start <= 0 ? int(k.levels.size()) - 1 : nearest(k.levels, start);
    knobs_.push_back(std::move(k));
  }
  enabled_ = enabled && !knobs_.empty();
  if (!enabled_) {
    knobs_.clear();
    put(p);
    return enabled ? "kernel layer: nothing to tune here (no core control, no cpufreq driver)" : "";
  }
  put(p);
  if (goal == Goal::Hold) return "";
  std::string r = "kernel: " + describe_kernel(p);
  if (goal == Goal::Raise) r += " (all, top frequency: throughput first)";
  else if (goal == Goal::Least) r += fmt::format(" (the floor; one more only while the online cores are {:.0f}% busy and it lowers J/byte)", kBusyPct);
  else r += fmt::format(" (ceil({} channels / {}))", channels, kChannelsPerCore);
  return r;
}

std::string KernelPlan::hold(const KernelCaps& caps, bool enabled, const Params& want, Params& p) {
  init(caps, enabled, Goal::Hold, 0, p);
  std::string said;
  for (const KernelKnobDef& d : kernel_knobs())
    if (long v = d.get(want); v > 0 && d.levels(caps).empty())
      said += fmt::format("{}{} {} asked for but {}", said.empty() ? "" : "; ", v, d.unit, d.absent);
  for (KernelKnob& k : knobs_) {
    long v = def_of(k).get(want);
    if (v <= 0) continue;  // left as the kernel has it
    k.index = nearest(k.levels, v);
    if (k.value() != v) said += fmt::format("{}{} {} asked, {} within reach", said.empty() ? "" : "; ", v, k.unit, k.value());
  }
  put(p);
  return said;
}

std::optional<KernelStep> KernelPlan::step(bool goal_holds, double cost, int channels, Params& p,
                                           std::optional<double> cpu_pct) {
  if (!enabled_ || goal_ == Goal::Raise || goal_ == Goal::Hold) return std::nullopt;
  if (goal_ == Goal::Scale) {
    KernelKnob* c = knob("cores");
    if (!c) return std::nullopt;
    int want = cores_for(channels, caps_);
    int index = int(std::find(c->levels.begin(), c->levels.end(), want) - c->levels.begin());
    if (index == c->index) return std::nullopt;
    c->index = index;
    return changed(KernelStep::Kind::Scaled, *c, fmt::format("kernel: {} for {} channels", c->level(), channels), p);
  }
  // Least: was the step up being measured worth it? Only a clear saving
  // keeps it (a core more draws its idle power for the rest of the run).
  if (probe_ >= 0 && probe_up_) {
    KernelKnob& k = knobs_[size_t(probe_)];
    probe_ = -1;
    // A fall to under a third is no core's doing: one of the two intervals
    // moved next to nothing (a server that sends in bursts a second apart
    // against half-second intervals), so it says nothing and the core goes.
    bool cheaper = cost_before_ > 0 && cost > 0 && cost < cost_before_ * (1 - kTolerance) && cost > cost_before_ / 3;
    if (goal_holds && cheaper) {
      k.settled = true;  // paid: not stepped back down while it pays
      return changed(KernelStep::Kind::Raised, k,
                     fmt::format("kernel: {} kept (J/byte fell {:.0f}%)", k.level(), (1 - cost / cost_before_) * 100), p);
    }
    --k.index;
    k.capped = true;
    return changed(KernelStep::Kind::Undone, k,
                   fmt::format("kernel: {} back down to {} ({})", k.name, k.level(),
                               cost > 0 && cost_before_ > 0
                                   ? fmt::format("J/byte {:+.0f}% with one more", (cost / cost_before_ - 1) * 100)
                                   : std::string("no energy figure to justify it")),
                   p);
  }
  if (goal_ == Goal::Least && probe_ < 0 && goal_holds && cpu_pct && *cpu_pct >= kBusyPct && cost > 0) {
    KernelKnob* c = knob("cores");
    if (c && !c->capped && !c->at_top()) {
      ++c->index;
      probe_ = int(c - knobs_.data());
      probe_up_ = true;
      cost_before_ = cost;
      return changed(KernelStep::Kind::TryHigher, *c,
                     fmt::format("kernel: trying {} (online cores {:.0f}% busy)", c->level(), *cpu_pct), p);
    }
  }
  // Lower: was the step down being measured worth it?
  if (probe_ >= 0) {
    KernelKnob& k = knobs_[size_t(probe_)];
    probe_ = -1;
    bool dearer = cost_before_ > 0 && cost > 0 && cost > cost_before_ * (1 + kTolerance);
    if (!goal_holds || dearer) {
      ++k.index;
      k.settled = true;
      return changed(KernelStep::Kind::Undone, k,
                     fmt::format("kernel: {} back up to {} ({})", k.name, k.level(),
                                 !goal_holds ? "goal missed when lowered"
                                             : fmt::format("J/byte rose {:.0f}%", (cost / cost_before_ - 1) * 100)),
                     p);
    }
    // The step held: keep it and try the next one below.
  }
  if (goal_holds) {
    for (size_t i = 0; i < knobs_.size(); ++i) {  // down order
      KernelKnob& k = knobs_[i];
      if (k.settled || k.at_floor()) continue;
      --k.index;
      probe_ = int(i);
      probe_up_ = false;
      cost_before_ = cost;
      return changed(KernelStep::Kind::TryLower, k, fmt::format("kernel: trying {} (goal holds)", k.level()), p);
    }
    return std::nullopt;
  }
  // Goal missed with nothing being probed: one step up, in the up order.
  for (size_t n = knobs_.size(); n-- > 0;) {
    KernelKnob& k = knobs_[n];
    if (k.at_top()) continue;
    ++k.index;
    k.settled = true;
    put(p);
    return changed(KernelStep::Kind::Raised, k,
                   "kernel: goal missed, up to " + describe_kernel(p),
                   p);
  }
  return std::nullopt;
}

nlohmann::json KernelPlan::summary() const {
  nlohmann::json j;
  j["tuned"] = enabled_;
  if (!enabled_) return j;
  Params p;
  put(p);
  j["mode"] = caps_.cores_mode;
  for (const KernelKnobDef& d : kernel_knobs()) j[d.column] = d.get(p);
  j["changes"] = changes_;
  return j;
}

}  // namespace xfer::tune
