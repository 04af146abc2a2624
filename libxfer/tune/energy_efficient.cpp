// HTEE, High Throughput Energy-Efficient (energy-aware-transfer-algorithms.txt
// §2.4, Algorithm 2) and EE (http-sla-transfer-algorithms.txt §4.3,
// Algorithm 3). pp and p per chunk as in MinE; chunk weights
//
//   w_i = log(size_i) * log(fileCount_i) / sum_j w_j          (Alg. 2 l. 7-11)
//   channelAllocation_i = floor(maxChannel * w_i)              (l. 12)
//
// then the search: activeChannel = 1, 1+step, ... <= maxChannel (step 2 in
// HTEE, 4 in EE), each level run for one control interval (5 s by default),
// its throughput / energy recorded (l. 16-22); the level with the highest
// ratio runs the rest of the transfer (l. 23-24). The channels of a level
// are split over the chunks by the weights; unlike MinE, Large is not held
// to one channel. Departure from the paper: the interval after each change
// of level (and the job's first, with its set-up and slow start) is not
// scored, the next one is: with intervals shorter than the paper's 5 s the
// change itself (connections opening or draining) would otherwise dominate.
//
// Kernel layer (KernelPlan::Scale): cores follow the channels of the level.
#include "energy_efficient.h"

#include <algorithm>
#include <fmt/format.h>

#include "common.h"
#include "xfer/log.h"

namespace xfer {

EnergyEfficientTuner::EnergyEfficientTuner(const TunerOptions& o) : opts_(o) {}

std::vector<int> EnergyEfficientTuner::levels(int max_channels, int step, const std::vector<int>& given) {
  std::vector<int> out;
  if (!given.empty()) {
    for (int l : given)
      if (l >= 1) out.push_back(std::min(l, std::max(1, max_channels)));
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
  }
  step = std::max(1, step);
  for (int l = 1; l <= std::max(1, max_channels); l += step) out.push_back(l);
  return out;
}

std::string EnergyEfficientTuner::at_level(int level, const Observation* obs) {
  active_ = tune::active_chunks(obs, info_.chunks.size());
  tune::set_cc(current_, tune::split_by_weight(level, info_.chunks, weights_, active_));
  std::optional<tune::KernelStep> k = kernel_.step(true, 0, current_.total_channels(), current_);
  return k ? "; " + k->reason : "";
}

Params EnergyEfficientTuner::init(const StartFacts& info) {
  info_ = info;
  weights_ = tune::chunk_weights(info.chunks);
  levels_ = levels(info.max_channels, opts_.search_step ? opts_.search_step : kDefaultStep, opts_.search_levels);
  current_.chunks = tune::base_chunks(info);
  std::string k =
      kernel_.init(info.kernel, opts_.kernel, tune::KernelPlan::Goal::Scale, levels_.front(), current_);
  at_level(levels_.front(), nullptr);
  std::string ls;
  for (int l : levels_) ls += (ls.empty() ? "" : ",") + std::to_string(l);
  current_.reason = fmt::format("energy-efficient: search levels {} (weights log(size)*log(count)); warm-up at {}", ls,
                                levels_.front());
  if (levels_.size() == 1) {
    chosen_ = levels_.front();
    current_.reason = fmt::format("energy-efficient: fixed level {} (no search)", chosen_);
  }
  if (!k.empty()) current_.reason += "; " + k;
  return current_;
}

std::optional<Params> EnergyEfficientTuner::decide(const Observation& obs) {
  if (chosen_) {  // the rest of the transfer: re-split when a chunk finishes
    if (tune::active_chunks(&obs, info_.chunks.size()) == active_) return std::nullopt;
    std::string k = at_level(chosen_, &obs);
    current_.reason = fmt::format("energy-efficient: level {} re-split over the chunks still running", chosen_) + k;
    return current_;
  }
  if (obs.settling) {  // the interval held a change of level (or the job's set-up): not scored
    if (!obs.near_end) return std::nullopt;
  } else {
    Score s;
    std::optional<double> dynamic = obs.energy(kEnergy);
    double joules = dynamic ? *dynamic : obs.joules.value_or(0);
    s.mbps = obs.throughput_bps / 1e6;
    s.joules = joules;
    s.end_joules = obs.joules.value_or(0);
    s.bytes_per_end_joule = s.end_joules > 0 ? double(obs.bytes_interval) / s.end_joules : 0;
    s.bytes_per_joule = joules > 0 ? double(obs.bytes_interval) / joules : 0;
    if (basis_.empty()) {
      basis_ = joules <= 0 ? "throughput only: no energy figures"
               : dynamic   ? "throughput per joule of the load (dynamic energy, " + obs.energy_source + ")"
                           : "throughput per joule of the end system (no dynamic figures: the idle draw is in it; " +
                                 obs.energy_source + ")";
      if (joules <= 0) log::warn("energy-efficient: no energy figures; the search ranks levels by throughput");
      else if (!dynamic) log::warn("energy-efficient: no dynamic energy figures; ranking on the end system's");
    }
    scores_[levels_[next_]] = s;
    ++next_;
  }
  bool done = next_ >= levels_.size() || obs.near_end;
  if (!done) {
    std::string k = at_level(levels_[next_], &obs);
    current_.reason = fmt::format("energy-efficient: searching, level {}", levels_[next_]) + k;
    return current_;
  }
  auto better = [&](const Score& a, const Score& b) {
    return basis_.rfind("throughput per joule", 0) == 0 ? a.bytes_per_joule > b.bytes_per_joule : a.mbps > b.mbps;
  };
  int best = levels_.front();
  const Score* bs = nullptr;
  for (auto& [level, s] : scores_)
    if (!bs || better(s, *bs)) best = level, bs = &s;
  chosen_ = best;
  std::string k = at_level(chosen_, &obs);
  current_.reason = bs ? fmt::format("energy-efficient: level {} chosen ({:.1f} Mbit/s, {:.3g} MB/J) for the rest",
                                     chosen_, bs->mbps, bs->bytes_per_joule / 1e6)
                       : fmt::format("energy-efficient: level {} (the job reached its tail before a score)", chosen_);
  if (obs.near_end && next_ < levels_.size()) current_.reason += "; search cut short: the job is near its end";
  current_.reason += k;
  return current_;
}

nlohmann::json EnergyEfficientTuner::summary() const {
  nlohmann::json s = nlohmann::json::array();
  for (auto& [level, sc] : scores_)
    s.push_back({{"level", level},
                 {"mbps", sc.mbps},
                 {"joules", sc.joules},
                 {"bytes_per_joule", sc.bytes_per_joule},
                 {"end_system_joules", sc.end_joules},
                 {"bytes_per_end_system_joule", sc.bytes_per_end_joule}});
  return {{"levels", levels_}, {"scores", s}, {"chosen", chosen_}, {"basis", basis_}, {"kernel", kernel_.summary()}};
}

}  // namespace xfer
