// The kernel layer serving every running job at once (issue 39): cores and
// frequency are machine-wide, so they are chosen for what the jobs together
// ask, not lent to the first job that came.
//
//   each job    its tuner asks for cores and a frequency within its policy's
//               range (caps_for), as when it had the layer alone
//   together    what is set is the most any job asks for: a floor or a
//               max-throughput job gets the cores it needs, and a job that
//               wants fewer (least energy) shares the machine with it
//   background  a background job's ask counts only when no other job asks:
//               it takes only what nobody else wants, the cores too
//   leaving     a job that ends takes its ask with it, and the machine goes
//               down to what the others ask (least energy for the rest)
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "xfer/arbiter.h"
#include "xfer/kernel.h"

namespace xfer {

class KernelShare {
 public:
  explicit KernelShare(KernelLayer& layer) : layer_(layer) {}
  KernelLayer& layer() { return layer_; }

  // The layer's caps within one policy's range (its min_cores, max_cores and
  // frequency range): what that job's tuner is told it may use.
  KernelCaps caps_for(const KernelLayer::Config& policy) const;

  // A job's ask (0: leaves that knob to the others); sets what the jobs
  // together ask for. "" or why it could not be set.
  std::string ask(uint32_t id, JobClass cls, int cores, long freq_khz);
  // The job ended: what the others ask for is set.
  std::string leave(uint32_t id);
  size_t jobs() const { return asks_.size(); }
  // What is set and for whom, e.g. "2 cores for job 3 (the most any of 2 jobs asks)".
  const std::string& reason() const { return reason_; }

 private:
  struct Ask {
    JobClass cls = JobClass::Normal;
    int cores = 0;
    long freq_khz = 0;
  };
  std::string apply();
  KernelLayer& layer_;
  std::map<uint32_t, Ask> asks_;
  std::string reason_;
  int set_cores_ = 0;  // what was last set
  long set_freq_ = 0;
};

}  // namespace xfer
