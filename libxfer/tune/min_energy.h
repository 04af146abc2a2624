#pragma once

#include "kernel_plan.h"
#include "xfer/tuner.h"

namespace xfer {

// MinE: energy-aware-transfer-algorithms.txt Algorithm 1; http-sla Algorithm 1.
class MinEnergyTuner : public Tuner {
 public:
  explicit MinEnergyTuner(const TunerOptions& o = {}) : kernel_enabled_(o.kernel) {}
  std::string name() const override { return "min-energy"; }
  // The machine's draw while the job runs: taking a core offline or
  // finishing sooner saves its idle power, which the dynamic figure ignores.
  static constexpr EnergyKind kEnergy = EnergyKind::EndSystem;
  std::optional<EnergyKind> minimises() const override { return kEnergy; }
  Params init(const StartFacts& info) override;
  std::optional<Params> decide(const Observation& obs) override;
  std::optional<double> next_look_s() const override;
  nlohmann::json summary() const override;

  // Line 10: cc = min(ceil(BDP / avg), ceil((avail + 1) / 2)), at least 1.
  static int concurrency(uint64_t bdp, double avg, int avail);
  // Channels a chunk of files of size avg needs when each carries pp HTTP/2
  // streams at once over p connections:
  // max(ceil(ceil(BDP / avg) / pp), ceil(ceil(BDP / buf) / p), 1).
  static int multiplexed_channels(const StartFacts& info, double avg, int pp, int p);

  // Large files on a path where one stream is loss-bound: below this share
  // of the link the rest of the job leaves it, with losses seen, p grows once
  // to fill kFillShare of that at the measured rate per stream (2x to
  // kMaxStreamsFactor x); kept only if the chunk's throughput then rises by
  // kKeepGain. All of the room: the job's end-system energy is mostly the
  // idle draw over its wall time, and a loss-bound stream adds its own rate.
  static constexpr double kLossBoundShare = 0.6;
  static constexpr double kFillShare = 1.0;
  static constexpr int kMaxStreamsFactor = 8;
  static constexpr double kKeepGain = 1.2;
  // Quick looks while the probe is open, from the path's RTT: a settle look
  // once slow start is over (kSettleRtts RTTs plus kSettleFloorS, for the
  // handshakes and the first request), then kMeasureRtts RTTs (at least
  // kMeasureFloorS) of the new state, each at most kLookCapS.
  static constexpr double kSettleRtts = 12, kSettleFloorS = 0.3;
  static constexpr double kMeasureRtts = 10, kMeasureFloorS = 1.0;
  static constexpr double kLookCapS = 3.0;

 private:
  std::optional<Params> try_more_streams(const Observation& obs);

  enum class Probe { Untried, Trying, Done };
  Probe probe_ = Probe::Untried;
  // The look asked for next: one interval, or a quick settle / measure look
  // (quick looks only when the path's RTT is known and a Large chunk may be probed).
  enum class Look { Interval, Settle, Measure };
  Look look_ = Look::Interval;
  bool quick_ = false;
  double settle_s_ = 0, measure_s_ = 0;
  size_t probe_chunk_ = 0;
  int probe_from_p_ = 1;
  double probe_from_bps_ = 0;
  double bandwidth_bps_ = 0;
  bool kernel_enabled_;
  tune::KernelPlan kernel_;
  Params current_;
  int intervals_ = 0;
  bool warned_no_energy_ = false;
  double joules_ = 0;
  uint64_t bytes_ = 0;
};

}  // namespace xfer
