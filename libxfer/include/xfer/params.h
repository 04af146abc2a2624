// The knobs a tuner turns. Vocabulary of DESIGN.md: cc (files in flight),
// p (range streams per file, each its own TCP connection), pp (requests
// outstanding per connection), cores, freq.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace xfer {

// The size class of a chunk of a job's files (dataset/partition.cpp sorts
// the files into them; every tuner turns its knobs per chunk).
enum class ChunkKind { Small = 0, Medium = 1, Large = 2 };
inline const char* to_string(ChunkKind k) {
  switch (k) {
    case ChunkKind::Small: return "small";
    case ChunkKind::Medium: return "medium";
    case ChunkKind::Large: return "large";
  }
  return "?";
}

// One chunk of a job's files, as dataset/partition.cpp makes them.
struct ChunkPlan {
  ChunkKind kind = ChunkKind::Small;
  std::vector<size_t> files;  // indices into the size vector given
  uint64_t bytes = 0;
  double size_sd = 0;  // standard deviation of its files' sizes (bytes)
  double avg_size() const { return files.empty() ? 0.0 : double(bytes) / double(files.size()); }
};

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

inline std::string to_string(const ChunkParams& p) {
  return "cc=" + std::to_string(p.cc) + " p=" + std::to_string(p.p) + " pp=" + std::to_string(p.pp);
}

}  // namespace xfer
