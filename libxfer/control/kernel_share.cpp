#include "xfer/kernel_share.h"

#include <algorithm>
#include <fmt/format.h>

#include "xfer/log.h"

namespace xfer {

KernelCaps KernelShare::caps_for(const KernelLayer::Config& policy) const {
  KernelCaps k = layer_.caps();
  k.min_cores = std::max(k.min_cores, policy.min_cores);
  if (policy.max_cores > 0) k.cores_present = std::min(k.cores_present, std::max(k.min_cores, policy.max_cores));
  k.min_cores = std::min(k.min_cores, k.cores_present);
  std::erase_if(k.freqs_khz, [&](long f) {
    return (policy.min_freq_khz > 0 && f < policy.min_freq_khz) || (policy.max_freq_khz > 0 && f > policy.max_freq_khz);
  });
  k.freq = k.freq && !k.freqs_khz.empty();
  k.freq_now_khz = k.freq ? k.freqs_khz.back() : 0;
  return k;
}

std::string KernelShare::ask(uint32_t id, JobClass cls, int cores, long freq_khz) {
  Ask& a = asks_[id];
  a.cls = cls;
  if (cores > 0) a.cores = cores;
  if (freq_khz > 0) a.freq_khz = freq_khz;
  return apply();
}

std::string KernelShare::leave(uint32_t id) {
  if (!asks_.erase(id)) return "";
  return apply();
}

std::string KernelShare::apply() {
  // Background jobs count only when no other job asks for that knob.
  auto most = [&](auto get, uint32_t* who) {
    long best = 0;
    for (bool background : {false, true}) {
      for (const auto& [id, a] : asks_)
        if ((a.cls == JobClass::Background) == background && get(a) > best) best = get(a), *who = id;
      if (best > 0) break;
    }
    return best;
  };
  uint32_t by_cores = 0, by_freq = 0;
  const int cores = int(most([](const Ask& a) { return long(a.cores); }, &by_cores));
  const long freq = most([](const Ask& a) { return a.freq_khz; }, &by_freq);
  if (cores <= 0 && freq <= 0) return "";
  std::string r;
  if (cores > 0) r = fmt::format("{} cores for job {}", cores, by_cores);
  if (freq > 0) r += fmt::format("{}{} kHz for job {}", r.empty() ? "" : ", ", freq, by_freq);
  r += asks_.size() > 1 ? fmt::format(" (the most any of {} jobs asks)", asks_.size()) : " (the one job asking)";
  const bool changed = r != reason_;
  reason_ = r;
  if (cores == set_cores_ && freq == set_freq_) return "";
  set_cores_ = cores, set_freq_ = freq;
  std::string err = layer_.apply(cores, freq);
  if (changed)
    log::event(log::msg::kKernelChanged, spdlog::level::info, "kernel layer: {}{}", reason_, err.empty() ? "" : ": " + err);
  return err;
}

}  // namespace xfer
