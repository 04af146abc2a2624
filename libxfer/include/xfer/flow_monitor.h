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

#include "xfer/measures.h"

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
