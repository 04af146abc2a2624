// The knobs a tuner turns. Vocabulary of DESIGN.md: cc (files in flight),
// p (range streams per file, each its own TCP connection), pp (requests
// outstanding per connection), cores, freq.
#pragma once

#include <string>
#include <vector>

#include "xfer/partition.h"

namespace xfer {

struct ChunkParams {
  int cc = 1;
  int p = 1;
  int pp = 1;
  bool operator==(const ChunkParams&) const = default;
};

struct Params {
  std::vector<ChunkParams> chunks;  // one per chunk of the job, same order
  int cores = 0;                    // 0: leave the kernel layer alone
  long freq_khz = 0;                // 0: leave the kernel layer alone
  double rate_cap_bps = 0;          // 0: none; else the job's receive rate is held near this
  // In the job's tail (nothing queued), an idle channel takes the back half
  // of another channel's request (schedule.cpp split_inflight): what a floor
  // asks to hold its rate to the last file. Off, the caller's cc and p stand
  // as they are (static, sweeps, the papers' algorithms).
  bool split_tail = false;
  std::string reason;               // why the tuner chose these (logged, in the timeline)
  int total_channels() const {  // the papers' channels: sum of cc over chunks
    int n = 0;
    for (const ChunkParams& c : chunks) n += c.cc;
    return n;
  }
};

// The kernel layer as the job found it: what a tuner may turn.
struct KernelCaps {
  bool cores = false;  // the online core count can be changed (hotplug or affinity)
  std::string cores_mode;  // "hotplug" | "affinity" | "" (not controlled)
  int cores_present = 1, cores_online = 1, min_cores = 1;
  bool freq = false;              // a cpufreq driver is there
  std::vector<long> freqs_khz;    // what it offers, ascending (empty: no driver)
  long freq_now_khz = 0;
};

std::string to_string(const ChunkParams& p);

}  // namespace xfer
