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
  std::string reason;               // why the tuner chose these (logged, in the timeline)
  bool same_knobs(const Params& o) const {
    return chunks == o.chunks && cores == o.cores && freq_khz == o.freq_khz;
  }
};

std::string to_string(const ChunkParams& p);

}  // namespace xfer
