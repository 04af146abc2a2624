// MaxThr, Maximum Throughput (http-sla-transfer-algorithms.txt §4.2,
// Algorithm 2). pp and p per chunk as in MinE; then the maxChannel channels
// are dealt round-robin in the order Large, Medium, Small:
//
//   for i in 0 .. maxChannel-1:  chunk[(Large, Medium, Small)[i mod 3]].cc++
//
// and the chunks run concurrently, which keeps large files filling the pipe
// while small ones pay their per-file overhead. Every interval the deal is
// checked: when a chunk has finished, all maxChannel channels are dealt again
// over the chunks still running ("the channels of the subgroup are scheduled
// for another subgroup based on the same round-robin order").
//
// Kernel layer (KernelPlan::Raise): every core online, the top frequency.
//
// With stream_cost K > 1 (issue 39: xferds of a fleet sharing a WAN link),
// the number of channels is searched online for the most utility
// T(n) / K^n - T(n) L(n) B, Falcon's (Arifuzzaman and Arslan, SC'21) cost
// per stream, K = 1.02 in the paper (a stream that adds less than 2% to the
// throughput is not worth having), and its penalty on the loss rate L the
// streams cause, B = 10 (more streams than the bottleneck's queue holds
// lose packets, and streams won from another transfer cost it losses). Each xferd then stops adding streams where its
// marginal gain falls under the cost, rather than all taking max_channels
// (or, worse, adding streams to win a larger share from the other), and
// Falcon shows their split is a fair Nash equilibrium.
#include "max_throughput.h"

#include <cmath>
#include <fmt/format.h>

#include "common.h"

namespace xfer {

Params MaxThroughputTuner::init(const StartFacts& info) {
  info_ = info;
  active_.assign(info.chunks.size(), true);
  Params p;
  p.chunks = tune::base_chunks(info);
  n_ = falcon() ? std::min(2, std::max(1, info.max_channels)) : info.max_channels;
  tune::set_cc(p, tune::deal_round_robin(n_, info.chunks, active_));
  p.reason = falcon() ? fmt::format("max-throughput: {} channels to start the search for the most throughput / "
                                    "{:g}^channels (Falcon)",
                                    n_, cost_)
                      : fmt::format("max-throughput: {} channels round-robin Large, Medium, Small", info.max_channels);
  std::string k = kernel_.init(info.kernel, kernel_enabled_, tune::KernelPlan::Goal::Raise, p.total_channels(), p);
  if (!k.empty()) p.reason += "; " + k;
  current_ = p;
  return p;
}

// An online gradient step on the utility, as Falcon's: each interval is
// compared with the one before; a step that raised the utility is taken
// again in the same direction, doubled (up to 8 channels); one that lowered
// it turns the search, by one. Comparing each interval with the last (not
// with the best seen) follows a link whose share moves as the other
// transfers on it come and go.
std::optional<Params> MaxThroughputTuner::search(const Observation& obs) {
  if (obs.settling || obs.throughput_bps <= 0) return std::nullopt;
  // The loss rate: loss signals per MB of segments of 1448 bytes.
  const double loss = obs.flow ? obs.flow->retrans_per_mb * 1448 / 1e6 : 0;
  const double u = obs.throughput_bps / std::pow(cost_, n_) - obs.throughput_bps * loss * kLossWeight;
  const int most = std::max(1, info_.max_channels);
  if (last_utility_ >= 0) {
    if (u >= last_utility_) step_ = std::min(8, step_ * 2);
    else dir_ = -dir_, step_ = 1;
  }
  const int was = n_;
  last_utility_ = u;
  last_n_ = n_;
  n_ = std::clamp(n_ + dir_ * step_, 1, most);
  if (n_ == was) dir_ = -dir_, step_ = 1, n_ = std::clamp(n_ + dir_, 1, most);  // at a bound: turn
  ++moves_;
  std::vector<int> cc = tune::deal_round_robin(n_, info_.chunks, active_);
  for (size_t i = 0; i < cc.size(); ++i)
    if (active_[i]) current_.chunks[i].cc = cc[i];
  current_.reason = fmt::format("max-throughput: {:.1f} Mbit/s at {} channels, loss {:.3f}%, utility {:.2f} (Falcon, K = "
                                "{:g}): {} channels",
                                obs.throughput_bps / 1e6, was, loss * 100, u / 1e6, cost_, n_);
  return current_;
}

std::optional<Params> MaxThroughputTuner::decide(const Observation& obs) {
  std::vector<bool> now = tune::active_chunks(&obs, info_.chunks.size());
  if (now == active_) return falcon() ? search(obs) : std::nullopt;
  active_ = now;
  std::vector<int> cc = tune::deal_round_robin(n_, info_.chunks, active_);
  bool any = false;
  for (size_t i = 0; i < cc.size(); ++i)
    if (active_[i]) current_.chunks[i].cc = cc[i], any = true;
  if (!any) return std::nullopt;
  ++redeals_;
  current_.reason = "max-throughput: a chunk finished; its channels dealt to the others";
  return current_;
}

nlohmann::json MaxThroughputTuner::summary() const {
  nlohmann::json j = {{"max_channels", info_.max_channels}, {"redeals", redeals_}, {"kernel", kernel_.summary()}};
  if (falcon()) j["falcon"] = {{"stream_cost", cost_}, {"channels", n_}, {"moves", moves_}};
  return j;
}

}  // namespace xfer
