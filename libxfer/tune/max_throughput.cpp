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
#include "max_throughput.h"

#include <fmt/format.h>

#include "common.h"

namespace xfer {

Params MaxThroughputTuner::init(const JobInfo& info) {
  info_ = info;
  active_.assign(info.chunks.size(), true);
  Params p;
  p.chunks = tune::base_chunks(info);
  tune::set_cc(p, tune::deal_round_robin(info.max_channels, info.chunks, active_));
  p.reason = fmt::format("max-throughput: {} channels round-robin Large, Medium, Small", info.max_channels);
  std::string k = kernel_.init(info.kernel, kernel_enabled_, tune::KernelPlan::Goal::Raise, p.total_channels(), p);
  if (!k.empty()) p.reason += "; " + k;
  current_ = p;
  return p;
}

std::optional<Params> MaxThroughputTuner::decide(const Observation& obs) {
  std::vector<bool> now = tune::active_chunks(&obs, info_.chunks.size());
  if (now == active_) return std::nullopt;
  active_ = now;
  std::vector<int> cc = tune::deal_round_robin(info_.max_channels, info_.chunks, active_);
  bool any = false;
  for (size_t i = 0; i < cc.size(); ++i)
    if (active_[i]) current_.chunks[i].cc = cc[i], any = true;
  if (!any) return std::nullopt;
  ++redeals_;
  current_.reason = "max-throughput: a chunk finished; its channels dealt to the others";
  return current_;
}

nlohmann::json MaxThroughputTuner::summary() const {
  return {{"max_channels", info_.max_channels}, {"redeals", redeals_}, {"kernel", kernel_.summary()}};
}

}  // namespace xfer
