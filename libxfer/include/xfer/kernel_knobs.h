// The kernel layer's knobs as data, in the way thermal_daemon's cooling
// devices and bpftune's descs[] are: each one's name, unit, the column it is
// reported under, its levels as the kernel layer found them, and where its
// value lives in Params (what a tuner asks) and in Observation (what was in
// effect). The tuners' controller (tune/kernel_plan.cpp), the control loop
// (what changed, what is logged and observed) and the kernel layer (what is
// set) read this table; a new knob (uncore frequency, a RAPL power cap) is
// one row, plus its levels in KernelCaps, its fields and its actuator.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "xfer/tuner.h"

namespace xfer {

struct KernelKnobDef {
  const char* name;    // "cores", "frequency"
  const char* unit;    // how a value reads: "cores", "kHz"
  const char* column;  // its key in reports, the history and the table: "cores", "freq_khz"
  const char* absent;  // why it has no levels when it has none: "core control is off"
  std::vector<long> (*levels)(const KernelCaps& caps);  // ascending; empty: not controllable here
  long (*get)(const Params& p);                         // 0: leave it as it is
  void (*set)(Params& p, long v);
  void (*observe)(Observation& o, long v);              // the value in effect over an interval
  long (*observed)(const Observation& o);               // ...as recorded (0: none)
};

// In the order the controller steps them down (frequency first: the
// cheaper step back); up is the reverse.
const std::vector<KernelKnobDef>& kernel_knobs();

// "4 cores, 2400000 kHz" for the knobs p sets (0s left out); "" when none.
std::string describe_kernel(const Params& p);
// Whether a and b ask for different kernel settings.
bool kernel_differs(const Params& a, const Params& b);

}  // namespace xfer
