// KernelLayer: the journal, CoreControl and FreqControl a job turns together.
#include <algorithm>
#include <chrono>
#include <cmath>

#include "xfer/kernel.h"
#include "xfer/log.h"

namespace xfer {
namespace {
CoreControl::Config core_config(const KernelLayer::Config& c) {
  CoreControl::Config cc;
  cc.mode = c.mode;
  cc.min_cores = c.min_cores;
  cc.allowed = c.allowed;
  cc.sysfs_root = c.sysfs_root;
  return cc;
}
}  // namespace

KernelLayer::KernelLayer(Config cfg)
    : cfg_(cfg),
      journal_(cfg.state_file, cfg.sysfs_root),
      cores_(core_config(cfg), journal_),
      freq_(journal_, cfg.sysfs_root),
      mode_(cfg.mode == CoreControl::Mode::Hotplug ? "hotplug" : "affinity") {
  if (cfg_.freq && !freq_.available())
    log::info("kernel layer: no cpufreq driver here; the frequency is not tuned");
  if (cfg_.mode == CoreControl::Mode::Hotplug && cfg_.spare_busy && !cfg_.others_cores) {
    load_ = std::make_unique<OthersLoad>();
    cfg_.others_cores = [l = load_.get()] { return l->cores(); };
  }
}

// A core other work keeps busy stays online: what the jobs ask for, plus the
// cores other processes use (rounded: a tenth of a core is no core), up to
// the cores there are. Affinity confines only xferd's own threads, and
// takes nothing from anyone.
int KernelLayer::with_others(int cores) {
  if (cfg_.mode != CoreControl::Mode::Hotplug || !cfg_.spare_busy || cores <= 0 || !cfg_.others_cores) return cores;
  const double others = std::max(0.0, cfg_.others_cores());
  const int want = std::min(cores_.present(), cores + int(std::lround(others)));
  const int on_top = std::max(0, want - cores);
  if (on_top != others_on_top_)
    log::info("kernel layer: {} cores online, {} for the jobs and {} for other work (other processes keep {:.1f} "
              "cores busy: a core they use is never taken offline)",
              std::max(cores, want), cores, on_top, others);
  others_on_top_ = on_top;
  return std::max(cores, want);
}

std::string KernelLayer::keep_up() {
  if (cfg_.mode != CoreControl::Mode::Hotplug || asked_cores_ <= 0) return "";
  try {
    settle(with_others(asked_cores_));
  } catch (const std::exception& e) {
    log::warn("kernel layer: cores: {}", e.what());
    return std::string("cores: ") + e.what();
  }
  return "";
}

double KernelLayer::now() const {
  if (cfg_.clock) return cfg_.clock();
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Hotplug pays when the job outlasts its cost: a core brought online is
// wanted at once, one taken offline only once the ask for fewer has stood
// offline_after_s. Meanwhile xferd's threads run where they will run after
// (affinity: one syscall a thread, nothing taken from other processes), so
// the job's CPU per byte is that of the fewer cores from its first interval.
void KernelLayer::settle(int want) {
  const int online = cores_.online();
  bool at_once = want >= online || cfg_.offline_after_s <= 0;
  if (!at_once) {
    const double t = now();
    if (fewer_since_ < 0) fewer_since_ = t;
    at_once = t - fewer_since_ >= cfg_.offline_after_s;
  }
  if (at_once) {
    // Down: the cores go first, then the threads spread over those left; up:
    // the threads get their cores back whether or not the kernel lets one on.
    if (want < online) cores_.set_online(want);
    fewer_since_ = -1;
    if (confined_) {
      cores_.confine(0);
      confined_ = 0;
    }
    if (want > online) cores_.set_online(want);
    return;
  }
  if (confined_ != want) {
    cores_.confine(want);
    if (!confined_)
      log::info("kernel layer: xferd's threads on {} of the {} online cores (affinity) for now; the rest go offline "
                "once the ask has stood {:.1f} s (a core taken offline for a shorter job costs more than it saves)",
                want, online, cfg_.offline_after_s);
    confined_ = want;
  }
}

KernelLayer::~KernelLayer() {  // ~KernelJournal restores the kernel's state
  if (!confined_) return;
  try {
    cores_.confine(0);
  } catch (const std::exception& e) {
    log::warn("kernel layer: could not give xferd's threads their cores back: {}", e.what());
  }
}

// The cores the jobs run on: those online, or fewer while a step down waits.
int KernelLayer::cores() const { return confined_ ? std::min(confined_, cores_.online()) : cores_.online(); }

Params KernelLayer::in_effect() const {
  Params p;
  p.cores = cores();
  p.freq_khz = freq_set_;
  return p;
}

KernelCaps KernelLayer::caps() const {
  KernelCaps k;
  k.cores = true;
  k.cores_mode = mode_;
  k.cores_present = cores_.present();
  k.cores_online = cores();
  k.min_cores = std::max(1, cfg_.min_cores);
  if (cfg_.mode == CoreControl::Mode::Hotplug && !cfg_.allowed.empty())
    k.cores_present = std::min(k.cores_present, int(cfg_.allowed.size()) + 1);
  if (cfg_.max_cores > 0) k.cores_present = std::max(k.min_cores, std::min(k.cores_present, cfg_.max_cores));
  k.freq = cfg_.freq && freq_.available();
  if (k.freq) {
    std::vector<unsigned long> f = freq_.frequencies(0);
    unsigned long lo = 0, hi = 0;
    if (f.empty() && freq_.limits(0, &lo, &hi) && hi > lo)  // no table (intel_pstate): five even steps
      for (int i = 0; i <= 4; ++i) f.push_back(lo + (hi - lo) * unsigned(i) / 4);
    std::sort(f.begin(), f.end());
    for (unsigned long x : f)
      if ((cfg_.min_freq_khz <= 0 || long(x) >= cfg_.min_freq_khz) && (cfg_.max_freq_khz <= 0 || long(x) <= cfg_.max_freq_khz))
        k.freqs_khz.push_back(long(x));
    k.freq = !k.freqs_khz.empty();
    k.freq_now_khz = k.freq ? k.freqs_khz.back() : 0;
  }
  return k;
}

std::string KernelLayer::apply(int cores, long freq_khz) {
  std::string err;
  // The policy's range bounds whatever a tuner asks for.
  if (cores > 0 && cfg_.max_cores > 0) cores = std::min(cores, cfg_.max_cores);
  if (freq_khz > 0 && cfg_.max_freq_khz > 0) freq_khz = std::min(freq_khz, cfg_.max_freq_khz);
  if (freq_khz > 0 && cfg_.min_freq_khz > 0) freq_khz = std::max(freq_khz, cfg_.min_freq_khz);
  if (cores > 0) asked_cores_ = cores;
  try {
    if (cores > 0 && cfg_.mode == CoreControl::Mode::Hotplug)
      settle(with_others(cores));
    else if (cores > 0 && cores != cores_.online())
      cores_.set_online(cores);
  } catch (const std::exception& e) {
    err = std::string("cores: ") + e.what();
  }
  try {
    if (freq_khz > 0 && freq_khz != freq_set_ && freq_.available()) {
      freq_.set_khz((unsigned long)freq_khz);
      freq_set_ = freq_khz;
    }
  } catch (const std::exception& e) {
    err += (err.empty() ? "" : "; ") + std::string("frequency: ") + e.what();
  }
  if (!err.empty()) log::warn("kernel layer: {}", err);
  return err;
}

}  // namespace xfer
