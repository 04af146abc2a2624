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
//
// xferd runs its transfers on one event-loop thread; extra cores serve the
// kernel's receive path (softirq), disk writeback and checksumming, whose
// load grows with the number of connections. kChannelsPerCore is where the
// Scale rule starts; Lower then corrects it by measurement.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "xfer/tuner.h"

namespace xfer::tune {

class KernelPlan {
 public:
  enum class Goal { Raise, Scale, Lower };
  static constexpr int kChannelsPerCore = 8;
  static constexpr double kTolerance = 0.05;

  // Sets p.cores / p.freq_khz for the start; returns the reason ("" when the
  // kernel layer is not tuned).
  std::string init(const KernelCaps& caps, bool enabled, Goal goal, int channels, Params& p);
  // One interval. goal_holds: the policy's goal is met; cost: joules per byte
  // in the interval just measured (<= 0 when unknown). Returns the reason for
  // a change, "" when nothing changed.
  std::string step(bool goal_holds, double cost, int channels, Params& p);
  // Lower: a step down is being measured.
  bool probing() const { return probe_ != Probe::None; }
  bool at_top() const;
  nlohmann::json summary() const;

  static int cores_for(int channels, const KernelCaps& caps);

 private:
  enum class Probe { None, Freq, Cores };
  void put(Params& p) const;
  KernelCaps caps_;
  bool enabled_ = false;
  Goal goal_ = Goal::Raise;
  int cores_ = 0;
  int freq_i_ = -1;  // index into caps_.freqs_khz
  Probe probe_ = Probe::None;
  double cost_before_ = 0;
  bool cores_settled_ = false, freq_settled_ = false;
  int changes_ = 0;
};

}  // namespace xfer::tune
