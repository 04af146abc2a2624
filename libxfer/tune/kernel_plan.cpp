#include "kernel_plan.h"

#include <algorithm>
#include <fmt/format.h>

namespace xfer::tune {

int KernelPlan::cores_for(int channels, const KernelCaps& caps) {
  int n = (std::max(1, channels) + kChannelsPerCore - 1) / kChannelsPerCore;
  return std::clamp(n, std::max(1, caps.min_cores), std::max(1, caps.cores_present));
}

void KernelPlan::put(Params& p) const {
  p.cores = enabled_ && caps_.cores ? cores_ : 0;
  p.freq_khz = enabled_ && caps_.freq && freq_i_ >= 0 ? caps_.freqs_khz[size_t(freq_i_)] : 0;
}

bool KernelPlan::at_top() const {
  return (!caps_.cores || cores_ >= caps_.cores_present) &&
         (!caps_.freq || freq_i_ + 1 >= int(caps_.freqs_khz.size()));
}

std::string KernelPlan::init(const KernelCaps& caps, bool enabled, Goal goal, int channels, Params& p) {
  caps_ = caps;
  goal_ = goal;
  enabled_ = enabled && (caps.cores || (caps.freq && !caps.freqs_khz.empty()));
  caps_.freq = caps.freq && !caps.freqs_khz.empty();
  if (!enabled_) {
    put(p);
    return enabled ? "kernel layer: nothing to tune here (no core control, no cpufreq driver)" : "";
  }
  cores_ = goal == Goal::Raise ? caps.cores_present : cores_for(channels, caps);
  freq_i_ = caps_.freq ? int(caps_.freqs_khz.size()) - 1 : -1;
  put(p);
  std::string r = fmt::format("kernel: {} cores{}", cores_, caps_.freq ? fmt::format(", {} kHz", p.freq_khz) : "");
  if (goal == Goal::Raise) r += " (all, top frequency: throughput first)";
  else r += fmt::format(" (ceil({} channels / {}))", channels, kChannelsPerCore);
  return r;
}

std::string KernelPlan::step(bool goal_holds, double cost, int channels, Params& p) {
  if (!enabled_ || goal_ == Goal::Raise) return "";
  if (goal_ == Goal::Scale) {
    int want = cores_for(channels, caps_);
    if (want == cores_ || !caps_.cores) return "";
    cores_ = want;
    put(p);
    ++changes_;
    return fmt::format("kernel: {} cores for {} channels", cores_, channels);
  }
  // Lower.
  if (probe_ != Probe::None) {
    Probe was = probe_;
    probe_ = Probe::None;
    bool dearer = cost_before_ > 0 && cost > 0 && cost > cost_before_ * (1 + kTolerance);
    if (!goal_holds || dearer) {
      std::string what = was == Probe::Freq ? "frequency" : "cores";
      if (was == Probe::Freq) ++freq_i_, freq_settled_ = true;
      else ++cores_, cores_settled_ = true;
      put(p);
      ++changes_;
      return fmt::format("kernel: {} back up to {} ({})", what,
                         was == Probe::Freq ? fmt::format("{} kHz", p.freq_khz) : fmt::format("{} cores", cores_),
                         !goal_holds ? "goal missed when lowered"
                                     : fmt::format("J/byte rose {:.0f}%", (cost / cost_before_ - 1) * 100));
    }
    // The step held: keep it and try the next one below.
  }
  if (goal_holds) {
    if (caps_.freq && !freq_settled_ && freq_i_ > 0) {
      --freq_i_, probe_ = Probe::Freq;
    } else if (caps_.cores && !cores_settled_ && cores_ > std::max(1, caps_.min_cores)) {
      --cores_, probe_ = Probe::Cores;
    } else {
      return "";
    }
    cost_before_ = cost;
    put(p);
    ++changes_;
    return probe_ == Probe::Freq ? fmt::format("kernel: trying {} kHz (goal holds)", p.freq_khz)
                                 : fmt::format("kernel: trying {} cores (goal holds)", cores_);
  }
  // Goal missed with nothing being probed: one step up, cores first.
  if (caps_.cores && cores_ < caps_.cores_present) {
    ++cores_, cores_settled_ = true;
  } else if (caps_.freq && freq_i_ + 1 < int(caps_.freqs_khz.size())) {
    ++freq_i_, freq_settled_ = true;
  } else {
    return "";
  }
  put(p);
  ++changes_;
  return fmt::format("kernel: goal missed, up to {} cores{}", cores_,
                     caps_.freq ? fmt::format(", {} kHz", p.freq_khz) : "");
}

nlohmann::json KernelPlan::summary() const {
  nlohmann::json j;
  j["tuned"] = enabled_;
  if (!enabled_) return j;
  j["mode"] = caps_.cores_mode;
  j["cores"] = caps_.cores ? cores_ : 0;
  j["freq_khz"] = caps_.freq && freq_i_ >= 0 ? caps_.freqs_khz[size_t(freq_i_)] : 0;
  j["changes"] = changes_;
  return j;
}

}  // namespace xfer::tune
