#include <algorithm>

#include "xfer/flow_monitor.h"
#include "xfer/sysfs.h"

namespace xfer {

uint64_t interface_rx_bytes() {
  SysFs net("/sys/class/net");
  uint64_t b = 0;
  for (const auto& dev : net.list(""))
    if (dev != "lo") b += uint64_t(net.read_int(dev + "/statistics/rx_bytes").value_or(0));
  return b;
}

FlowInterval FlowAccountant::interval(const std::vector<FlowCounters>& now, double dt_s) {
  FlowInterval out;
  double weighted = 0;
  uint64_t loss = 0;
  for (const auto& f : now) {
    auto it = last_.find(f.id);
    uint64_t prev = it == last_.end() ? 0 : it->second.bytes_received;
    uint32_t prev_loss = it == last_.end() ? 0 : it->second.retrans;
    uint64_t d = f.bytes_received >= prev ? f.bytes_received - prev : 0;
    out.bytes += d;
    uint64_t signals = f.retrans >= prev_loss ? f.retrans - prev_loss : 0;
    loss += signals;
    if (signals > 0) {
      // One episode per window of the flow's segments (flow_monitor.h).
      double window = f.rtt_ms > 0 && dt_s > 0 ? double(d) / LossCount::kSegmentBytes * (f.rtt_ms / 1e3) / dt_s : 0;
      out.loss_events += window > 1 ? std::max(1.0, double(signals) / window) : double(signals);
    }
    if (d > 0 && f.rtt_ms > 0) weighted += f.rtt_ms * double(d);
    if (d > 0 || !f.closed) ++out.flows;
    if (f.closed) last_.erase(f.id);
    else last_[f.id] = f;
  }
  if (dt_s > 0) out.throughput_bps = double(out.bytes) * 8 / dt_s;
  if (out.bytes > 0) out.rtt_ms = weighted / double(out.bytes);
  if (out.rtt_ms > 0 && last_rtt_ms_ > 0) out.delta_rtt_ms = out.rtt_ms - last_rtt_ms_;
  if (out.rtt_ms > 0) last_rtt_ms_ = out.rtt_ms;
  if (out.bytes > 0) out.retrans_per_mb = double(loss) / (double(out.bytes) / 1e6);
  return out;
}

}  // namespace xfer
