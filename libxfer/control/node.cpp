#include "xfer/node.h"

#include "xfer/log.h"

namespace xfer {

namespace {

std::unique_ptr<FlowMonitor> open_flows(Node::Config::Flows f) {
  if (f == Node::Config::Flows::Off) return nullptr;
  return make_flow_monitor(f == Node::Config::Flows::Ebpf);
}

}  // namespace

Node::Node(sd_event* loop, Config c)
    : engine_(loop),
      flows_(open_flows(c.flows)),
      machine_(make_machine(c.power, EnergyScope::Machine)),
      arbiter_(c.arbiter),
      arbitrate_(c.arbitrate) {}

Node::~Node() {
  kernel_share_.reset();
  kernel_.reset();
}

std::unique_ptr<RunningJob> Node::run(RunningJobSpec spec, hla::History* history, const KernelLayer::Config* kernel,
                                      std::string* kernel_note) {
  bool lent = false;
  if (kernel) {
    std::string note;
    if (!kernel_) {
      kernel_ = open_kernel_layer(*kernel, &note);
      if (kernel_) kernel_share_ = std::make_unique<KernelShare>(*kernel_);
    }
    lent = kernel_ != nullptr;
    if (kernel_note) *kernel_note = note;
  }
  spec.kernel = lent ? kernel_.get() : nullptr;
  spec.kernel_share = lent ? kernel_share_.get() : nullptr;
  std::unique_ptr<RunningJob> r;
  try {
    r = std::make_unique<RunningJob>(engine_, std::move(spec),
                                     SharedParts{flows_.get(), machine_.get(), history, arbitrate_ ? &arbiter_ : nullptr});
  } catch (...) {
    if (lent && kernel_users_ == 0) release_kernel();
    throw;
  }
  if (lent) ++kernel_users_;
  return r;
}

void Node::retire(std::unique_ptr<RunningJob>& job) {
  if (!job) return;
  const bool held = job->holds_kernel();
  job.reset();  // the loop, the recorder, then the Job
  if (held && kernel_users_ > 0 && --kernel_users_ == 0) release_kernel();
}

void Node::release_kernel() {
  kernel_share_.reset();
  kernel_.reset();  // restores cores and frequency
}

std::string Node::energy_source() const { return machine_->meter() ? machine_->meter()->source() : "none"; }

}  // namespace xfer
