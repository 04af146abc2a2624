#include "kernel_plan.h"

#include <algorithm>
#include <fmt/format.h>

namespace xfer::tune {

int KernelPlan::cores_for(int channels, const KernelCaps& caps) {
  int n = (std::max(1, channels) + kChannelsPerCore - 1) / kChannelsPerCore;
  return std::clamp(n, std::max(1, caps.min_cores), std::max(1, caps.cores_present));
}

KernelKnob* KernelPlan::knob(const char* name) {
  for (KernelKnob& k : knobs_)
    if (k.name == name) return &k;
  return nullptr;
}

void KernelPlan::put(Params& p) const {
  p.cores = 0;
  p.freq_khz = 0;
  if (!enabled_) return;
  for (const KernelKnob& k : knobs_) {
    if (k.name == "cores") p.cores = int(k.value());
    if (k.name == "frequency") p.freq_khz = k.value();
  }
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
  if (caps.freq && !caps.freqs_khz.empty()) {
    KernelKnob f{"frequency", "kHz", caps.freqs_khz};
    f.index = int(f.levels.size()) - 1;  // the top to start
    knobs_.push_back(f);
  }
  if (caps.cores) {
    KernelKnob c{"cores", "cores", {}};
    for (int n = std::max(1, caps.min_cores); n <= std::max(1, caps.cores_present); ++n) c.levels.push_back(n);
    int start = goal == Goal::Raise ? caps.cores_present
                : goal == Goal::Least ? std::max(1, caps.min_cores)
                                      : cores_for(channels, caps);
    c.index = std::clamp(int(std::find(c.levels.begin(), c.levels.end(), start) - c.levels.begin()), 0,
                         int(c.levels.size()) - 1);
    knobs_.push_back(c);
  }
  enabled_ = enabled && !knobs_.empty();
  if (!enabled_) {
    knobs_.clear();
    put(p);
    return enabled ? "kernel layer: nothing to tune here (no core control, no cpufreq driver)" : "";
  }
  put(p);
  std::string r = fmt::format("kernel: {} cores{}", p.cores, p.freq_khz ? fmt::format(", {} kHz", p.freq_khz) : "");
  if (goal == Goal::Raise) r += " (all, top frequency: throughput first)";
  else if (goal == Goal::Least) r += fmt::format(" (the floor; one more only while the online cores are {:.0f}% busy and it lowers J/byte)", kBusyPct);
  else r += fmt::format(" (ceil({} channels / {}))", channels, kChannelsPerCore);
  return r;
}

std::optional<KernelStep> KernelPlan::step(bool goal_holds, double cost, int channels, Params& p,
                                           std::optional<double> cpu_pct) {
  if (!enabled_ || goal_ == Goal::Raise) return std::nullopt;
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
    bool cheaper = cost_before_ > 0 && cost > 0 && cost < cost_before_ * (1 - kTolerance);
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
                   fmt::format("kernel: goal missed, up to {} cores{}", p.cores,
                               p.freq_khz ? fmt::format(", {} kHz", p.freq_khz) : ""),
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
  j["cores"] = p.cores;
  j["freq_khz"] = p.freq_khz;
  j["changes"] = changes_;
  return j;
}

}  // namespace xfer::tune
