// One transfer node: what is machine-wide on it and shared by every job that
// runs here. xferd is built on it, and so are the arbiter's tests and
// xfer-bench's contention scenarios (run_job_set, xfer/job_set.h): what they
// measure is the code xferd runs.
//
//   engine     one libcurl multi on the caller's sd-event loop
//   flows      one flow monitor (eBPF, else TCP_INFO; or none)
//   machine    energy, interface bytes and CPU, measured once and divided
//   arbiter    the link among the running jobs (xfer/arbiter.h)
//   kernel     cores and frequency, opened when the first job that may turn
//              them starts, shared by all such jobs (xfer/kernel_share.h),
//              closed (cores and frequency restored) when the last one ends
//
//   Node node(loop, cfg);
//   std::unique_ptr<RunningJob> r = node.run(std::move(spec), history, &kernel_cfg, &note);
//   r->start();  ...  node.retire(r);
#pragma once

#include <systemd/sd-event.h>

#include <cstddef>
#include <memory>
#include <string>

#include "xfer/arbiter.h"
#include "xfer/energy.h"
#include "xfer/engine.h"
#include "xfer/flow_monitor.h"
#include "xfer/kernel.h"
#include "xfer/kernel_share.h"
#include "xfer/machine.h"
#include "xfer/running_job.h"

namespace xfer {

class Node {
 public:
  struct Config {
    enum class Flows { Ebpf, TcpInfo, Off };
    Flows flows = Flows::Ebpf;  // Ebpf falls back to TCP_INFO, and says so
    PowerCoefficients power;    // the model where no meter reads (xfer/energy.h)
    ArbiterConfig arbiter;
    // false: the jobs are not divided by the arbiter, each tunes as if alone
    // (what two machines behind one link do; xfer-bench's and the tests'
    // model of them).
    bool arbitrate = true;
  };
  Node(sd_event* loop, Config c);
  ~Node();  // the kernel layer is closed last: cores and frequency restored
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  Engine& engine() { return engine_; }
  FlowMonitor* flows() const { return flows_.get(); }
  Machine& machine() const { return *machine_; }
  Arbiter& arbiter() { return arbiter_; }
  const Arbiter& arbiter() const { return arbiter_; }
  // The layer while a job holds it (null: none does).
  KernelLayer* kernel() const { return kernel_.get(); }
  size_t kernel_users() const { return kernel_users_; }

  // A job on this node, not yet started: its spec gets the node's flows,
  // machine and arbiter, and `history` records it (null: unrecorded). With
  // `kernel` (the layer's mode, journal and widest range: each job asks
  // within spec.kernel_range), the job shares the kernel layer, opened now
  // if no job holds it; when it cannot be opened the job tunes the
  // application layer only and *kernel_note says why. Throws what
  // RunningJob throws; a layer opened for it alone is closed again.
  std::unique_ptr<RunningJob> run(RunningJobSpec spec, hla::History* history, const KernelLayer::Config* kernel,
                                  std::string* kernel_note);
  // Tears a job down (its loop, its history rows, the Job) and gives back
  // its hold on the kernel layer: the last one out closes it.
  void retire(std::unique_ptr<RunningJob>& job);
  // The energy meter's source ("none" without one).
  std::string energy_source() const;

 private:
  void release_kernel();
  Engine engine_;
  std::unique_ptr<FlowMonitor> flows_;
  std::unique_ptr<Machine> machine_;
  Arbiter arbiter_;
  bool arbitrate_;
  std::unique_ptr<KernelLayer> kernel_;
  std::unique_ptr<KernelShare> kernel_share_;
  size_t kernel_users_ = 0;
};

}  // namespace xfer
