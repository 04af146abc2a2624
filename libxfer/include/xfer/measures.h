// What a job's measuring gives its tuner, as plain figures (the model rung
// of the folders' order, scripts/include-graph.py): the flow monitor (net/)
// and the energy meters (energy/) fill them; tuner.h's Observation carries
// them to every policy.
#pragma once

#include <cstdint>

namespace xfer {

// The two energies of a transfer (issue 16; energy-aware eq. 4):
// end-system: what the client machine draws over the transfer's wall time,
//   the idle draw of its online cores plus the dynamic part (the
//   energy-aware and http-sla papers' figure);
// dynamic: above the idle draw only (cross-layer-hla and fasthla subtract the
//   baseline).
enum class EnergyKind { EndSystem, Dynamic };
inline const char* energy_kind_name(EnergyKind k) { return k == EnergyKind::Dynamic ? "dynamic" : "end-system"; }

// What one interval of a set of flows (a job's, a chunk's) adds up to
// (cross-layer-hla.txt Algorithms 1-2: weighted throughput, delta RTT).
// External load is machine-wide: machine.h.
struct FlowInterval {
  double throughput_bps = 0;   // from byte deltas
  double rtt_ms = 0;           // mean RTT weighted by each flow's bytes in the interval
  double delta_rtt_ms = 0;     // change against the previous interval
  double retrans_per_mb = 0;   // loss signals per MB received
  // Loss episodes: a lost segment makes every segment behind it arrive out
  // of order until its retransmission fills the hole, about one RTT later,
  // so one loss shows as a window of out-of-order arrivals. Per flow: its
  // signals over the segments it received in one RTT at this interval's
  // rate (at least one episode when it had any signal).
  double loss_events = 0;
  int flows = 0;               // flows that moved bytes or are open
  uint64_t bytes = 0;
};

// A path's loss as its flows saw it over many intervals: their loss
// episodes (FlowInterval::loss_events) over the segments received (bytes /
// kSegmentBytes, the Ethernet MSS). Counting the out-of-order arrivals
// themselves gave a path with 0.015% loss 31% (hla-learning-6b2353b).
struct LossCount {
  static constexpr double kSegmentBytes = 1448;
  double signals = 0, segments = 0;
  void add(const FlowInterval& f) {
    if (f.bytes == 0) return;
    signals += f.loss_events;
    segments += double(f.bytes) / kSegmentBytes;
  }
  // Percent; < 0: nothing received yet.
  double pct() const { return segments > 0 ? 100 * signals / segments : -1; }
};

}  // namespace xfer
