// The kernel layer as every SLA policy turns it: online cores and CPU
// frequency are knobs like cc (cross-layer-hla.txt §I-II: the earlier
// cross-layer heuristic tuned cc / p / pp together with the number of active
// cores and their frequency; §III eq. 1-2: energy and throughput are both
// functions of cpu_num and cpu_freq).
//
//   Raise  (max-throughput): every core, the top frequency.
//   Scale  (energy-efficient): cores follow the active channels,
//          cores = ceil(channels / kChannelsPerCore) within [min, present];
//          top frequency.
//   Lower  (min-energy, throughput-target): start as Scale, then each interval
//          try one step down (frequency first, then a core) while the goal
//          holds; a step that breaks the goal or raises the cost (joules per
//          byte) by more than kTolerance is undone and that knob stays put.
//          When the goal is missed, one step back up.
//   Least  (min-energy): cores start at the floor, the top frequency; each
//          interval, while the online cores are busy (kBusyPct of them or
//          more), try one core more and keep it only if the joules per byte
//          fall by more than kTolerance; otherwise step the frequency down as
//          Lower does. A core that pays for its idle draw is one the transfer
//          was short of; the channels alone do not say so (17 channels of
//          small files at 200 Mbit/s keep one core half busy here), and a
//          transfer shorter than two intervals never gets to measure a step
//          down from a start that was too high.
//   Hold   (hla-energy, hla-throughput, static): the policy names the
//          levels (the table's, the caller's); each knob goes to the level
//          nearest it within the kernel layer's range, and stays.
//
// xferd runs its transfers on one event-loop thread; extra cores serve the
// kernel's receive path (softirq), disk writeback and checksumming, whose
// load grows with the number of connections. kChannelsPerCore is where the
// Scale rule starts; Lower then corrects it by measurement.
// The knobs are data (xfer/kernel_knobs.h, in the way thermal_daemon's
// cooling devices are): each row of that table makes a KernelKnob, with its
// levels, ascending, and where it stands; one controller steps any of them,
// in the table's order (down: frequency, then cores; up: the reverse). A new
// knob (uncore frequency, a RAPL power cap) is one more row there.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "xfer/tuner.h"

namespace xfer::tune {

struct KernelKnob {
  std::string name;          // "cores", "frequency"
  std::string unit;          // how a level reads: "cores", "kHz"
  std::vector<long> levels;  // ascending; empty: not controllable here
  int index = -1;
  bool settled = false;      // a step down cost more than it saved, or missed the goal: stays
  bool capped = false;       // a step up did not pay: not tried again
  long value() const { return index >= 0 ? levels[size_t(index)] : 0; }
  bool at_top() const { return levels.empty() || index + 1 >= int(levels.size()); }
  bool at_floor() const { return levels.empty() || index <= 0; }
  std::string level() const { return std::to_string(value()) + " " + unit; }
};

// What one step did: a typed decision (its reason is for the timeline).
struct KernelStep {
  enum class Kind { Scaled, TryLower, TryHigher, Undone, Raised };
  Kind kind;
  std::string knob;
  long value = 0;
  std::string reason;
};

class KernelPlan {
 public:
  enum class Goal { Raise, Scale, Lower, Least, Hold };
  static constexpr int kChannelsPerCore = 8;
  static constexpr double kTolerance = 0.05;
  static constexpr double kBusyPct = 85;  // Least: the online cores' utilisation that tries one more

  // Sets p.cores / p.freq_khz for the start; returns the reason ("" when the
  // kernel layer is not tuned).
  std::string init(const KernelCaps& caps, bool enabled, Goal goal, int channels, Params& p);
  // Goal Hold: each knob at the level nearest what `want` asks (0: left as
  // the kernel has it), into p. Returns what could not be had exactly ("").
  std::string hold(const KernelCaps& caps, bool enabled, const Params& want, Params& p);
  // One interval. goal_holds: the policy's goal is met; cost: joules per byte
  // in the interval just measured (<= 0 when unknown); cpu_pct: the machine's
  // utilisation of its online cores in it (Least; nullopt: unknown, never
  // busy). nullopt: no change.
  std::optional<KernelStep> step(bool goal_holds, double cost, int channels, Params& p,
                                 std::optional<double> cpu_pct = std::nullopt);
  // Lower, Least: a step is being measured.
  bool probing() const { return probe_ >= 0; }
  bool at_top() const;
  nlohmann::json summary() const;

  static int cores_for(int channels, const KernelCaps& caps);

 private:
  KernelKnob* knob(const char* name);
  void put(Params& p) const;
  KernelStep changed(KernelStep::Kind kind, const KernelKnob& k, std::string reason, Params& p);
  KernelCaps caps_;
  bool enabled_ = false;
  Goal goal_ = Goal::Raise;
  // Down order: frequency first (the cheaper step back), then cores.
  std::vector<KernelKnob> knobs_;
  int probe_ = -1;  // the knob whose step is being measured
  bool probe_up_ = false;  // ... and it was a step up (Least)
  double cost_before_ = 0;
  int changes_ = 0;
};

}  // namespace xfer::tune
