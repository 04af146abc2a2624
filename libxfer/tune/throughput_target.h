#pragma once


#include <algorithm>

#include "common.h"
#include "kernel_plan.h"
#include "xfer/tuner.h"

namespace xfer {

// SLAEE / FlexibleThr: energy-aware-transfer-algorithms.txt Algorithm 3; http-sla Algorithm 4.
class ThroughputTargetTuner : public Tuner {
 public:
  static constexpr double kBand = 0.10;      // above target * (1 + kBand) is overshoot
  static constexpr int kProbeIntervals = 2;     // --target-pct: at least this many intervals measure the maximum,
  static constexpr int kMaxProbeIntervals = 8;  // more while the rate still rises, up to this
  static constexpr double kStartMargin = tune::LeftChannels::kMargin;  // channels over start_channels' estimate (init says why)
  static constexpr int kQuickLooks = 6;  // looks shorter than an interval at the start (next_look_s)
  static constexpr double kCapMargin = tune::CapMargin::kLeast;  // a held rate sits at least this far above the need
  static constexpr double kMakeUp = 0.08;     // at most this far over the target to make up for the start
  explicit ThroughputTargetTuner(const TunerOptions& o);
  std::string name() const override { return "throughput-target"; }
  // The least energy that holds the target: the machine's draw (energy-aware SLAEE).
  static constexpr EnergyKind kEnergy = EnergyKind::EndSystem;
  std::optional<EnergyKind> minimises() const override { return kEnergy; }
  Params init(const StartFacts& info) override;
  std::optional<Params> decide(const Observation& obs) override;
  std::optional<double> next_look_s() const override;
  nlohmann::json summary() const override;

  // Alg. 3 line 11: the concurrency the target asks for, from what `cc` gave.
  static int jump(int cc, double target_bps, double actual_bps, int max_channels);
  // The channels a rate above the target needs: ceil(cc * target / actual),
  // at least 1, never more than cc.
  static int trim(int cc, double target_bps, double actual_bps);
  // The channels to start with for an absolute target: the target over what
  // one channel can carry on this path (the least of the TCP window over the
  // RTT, Mathis's loss bound, the link, files on an open connection, and a
  // file's slow start for a job too short to be corrected); 1 when the RTT
  // is not known. Why, into *why.
  static int start_channels(const StartFacts& info, double target_bps, std::string* why);
  // The job at its floor ends before the first look and three more are over.
  static bool too_short_to_correct(const StartFacts& info, double target_bps);
  // The quick looks' lengths (next_look_s): the first once every channel's
  // slow start is over, the others ten round trips, half a second at least.
  static double first_look_s(double rtt_s) { return 12 * rtt_s + 0.3; }
  static double look_s(double rtt_s) { return std::max(0.5, 10 * rtt_s); }
  // What a channel opened at a look's start carries over the look, as a
  // share of a warm channel's `per_bps`: nothing while its connection opens,
  // its first request goes and slow start (an initial window of 10
  // segments) reaches a warm channel's window (per_bps x RTT); all of it
  // after. A fifth at least (a connection handed over warm), 1 at most.
  static double cold_share(double look_s, double rtt_s, double per_bps);
  // The ramp's step (its quick looks, each judged): the channels that bring
  // `aim` in the next look (next_s long) when those added now start cold,
  // from `thr` measured over `look_s` at `cc` channels of which `cold` were
  // opened at its start. A warm channel's rate is the look's rate over the
  // channels, the cold ones at their share. `cc` itself when the channels
  // there carry `aim` once warm; more than cc, up to max_channels, otherwise.
  static int ramp_channels(int cc, int cold, double thr, double aim, double look_s, double next_s, double rtt_s,
                           int max_channels);
  double target_bps() const { return target_bps_; }

 private:
  void allocate(const Observation* obs);
  double first_look_due() const;  // when the first look is due (next_look_s)
  double rtt_s(const Observation& obs) const;
  int channels_for_left(const Observation& obs);
  int channels_to_end_together(const Observation& obs) const;
  // The rate a cap holds: the need + the cap margin; in the tail, the band's middle at least.
  double held_bps() const {
    return std::max(margin_.held(need_bps_, target_bps_, kBand), tail_ ? target_bps_ * (1 + kBand / 2) : 0.0);
  }
  double need_bps(const Observation& obs) const;  // what the rest of the job needs (its average)
  std::string hold_rate(double thr);              // a cap at held_bps(); why, or "" when it is there
  std::vector<double> work_weights(const Observation* obs) const;
  std::optional<std::vector<double>> work_left(const Observation& obs) const;
  bool scale_pp(double factor, const Observation& obs);
  TunerOptions opts_;
  StartFacts info_;
  std::vector<double> weights_;
  std::vector<ChunkParams> base_;  // MinE's p and pp per chunk
  enum class Phase { Probe, Control } phase_ = Phase::Control;
  int probe_n_ = 0;
  double max_bps_ = 0, target_bps_ = 0, need_bps_ = 0;
  int total_ = 1;
  bool jumped_ = false, rearranged_ = false, out_of_reach_ = false;
  // The last decision raised channels (or the job just started): below the
  // target, the settling interval that follows is used, since it can only
  // under-state what the new channels carry (an overshoot is held by the cap).
  bool raised_ = true;
  int warm_ = 0;  // the channels there before the last decision raised them (the others opened cold)
  bool skip_first_ = false;  // the start came from the path's estimate: its cold first look decides little
  int quick_looks_ = 0;      // looks left before whole intervals (ended by two in band running)
  double loop_t0_s_ = -1;    // the job's time when the looks began (after discovery)
  double look_t_s_ = 0;      // the time of the last look since then
  bool too_short_ = false;   // too_short_to_correct at init
  bool tail_ = false;        // the last look found the job in its tail
  double total_bytes_ = 0;   // the job's bytes at init
  int in_band_run_ = 0;      // looks in the band running
  tune::CapMargin margin_;
  tune::LeftChannels left_;  // the channels the files left need (channels_for_left)
  tune::KernelPlan kernel_;
  Params current_;
  std::vector<bool> active_;  // the chunks running at the last decision
  // Deviation: from the first interval at or above the target to the tail.
  bool reached_ = false;
  double ctl_bytes_ = 0, ctl_s_ = 0;
  int in_band_ = 0, ctl_intervals_ = 0;
};

}  // namespace xfer
