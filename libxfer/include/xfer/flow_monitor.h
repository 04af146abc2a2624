// FlowMonitor: per-flow TCP measurements for the sockets the engine owns,
// from eBPF (bpf/flowmon.bpf.c) where it loads, else from TCP_INFO on the
// engine's own sockets; the source in use is logged and reported.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace xfer {

struct FlowCounters {
  uint64_t id = 0;               // socket cookie
  uint32_t job = 0;
  uint64_t bytes_received = 0;   // cumulative
  double rtt_ms = 0;             // the flow's RTT: receiver estimate when it has one, else srtt
  double rttvar_ms = 0;
  uint32_t retrans = 0;          // our retransmissions + out-of-order arrivals (the receiver's sight of loss)
  uint16_t local_port = 0, remote_port = 0;
  bool closed = false;
};

class FlowMonitor {
 public:
  virtual ~FlowMonitor() = default;
  virtual std::string source() const = 0;  // "ebpf" | "tcp_info"
  // Why the source is what it is, where that is not the plain choice ("").
  virtual std::string source_note() const { return {}; }
  // A socket the engine created (before connect) and when it goes. own()
  // returns the flow's id (its socket cookie), the FlowCounters::id it gets.
  virtual uint64_t own(int fd, uint32_t job) = 0;
  virtual void disown(int fd) = 0;
  // Current counters of every flow of the job, closed ones included once.
  virtual std::vector<FlowCounters> flows(uint32_t job) = 0;

  // What measuring costs: CPU time of the BPF programs (kernel BPF stats)
  // and of this reader's sampling (thread CPU time).
  struct Overhead {
    uint64_t bpf_run_ns = 0, bpf_runs = 0, reader_ns = 0;
  };
  virtual Overhead overhead() const = 0;
  // The one-off CPU time of loading the BPF programs, where this monitor
  // loaded them while a job ran (make_flow_monitor_deferred: its loading
  // thread's CPU time); 0 otherwise. Cheap: read at every interval
  // (Observation::one_off_cpu_s), where overhead() asks the kernel.
  virtual uint64_t load_ns() const { return 0; }
};

// eBPF when it loads and attaches (root, BTF), else TCP_INFO; says which.
std::unique_ptr<FlowMonitor> make_flow_monitor(bool allow_ebpf = true);
// For a process that runs one job (xferctl run): TCP_INFO on the job's
// sockets from the start, eBPF loaded on a thread of its own once the job has
// run `after` (0: at once), the open sockets handed over when it is loaded.
// The load (the kernel's BTF parsed, the programs verified: about 60 ms of
// CPU) is more than the rest of a one-second job's measuring, so a job
// shorter than `after` never pays it; source_note() says which it was.
// Nothing waits for the load but the destructor. Call it from one thread only.
std::unique_ptr<FlowMonitor> make_flow_monitor_deferred(bool allow_ebpf, std::chrono::milliseconds after);

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

class FlowAccountant {
 public:
  // Deltas since the previous call.
  FlowInterval interval(const std::vector<FlowCounters>& now, double dt_s);

 private:
  std::map<uint64_t, FlowCounters> last_;
  double last_rtt_ms_ = 0;
};

// Received bytes of every interface but lo, in this network namespace.
uint64_t interface_rx_bytes();

}  // namespace xfer
