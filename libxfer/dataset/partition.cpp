#include "xfer/partition.h"

#include <array>
#include <cmath>

namespace xfer {

std::vector<ChunkPlan> partition_files(const std::vector<uint64_t>& sizes, const PartitionConfig& cfg) {
  std::array<ChunkPlan, 3> c;
  for (int k = 0; k < 3; ++k) c[k].kind = static_cast<ChunkKind>(k);
  const double bdp = double(cfg.bdp_bytes > 0 ? cfg.bdp_bytes : 1);
  uint64_t total = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    double s = double(sizes[i]);
    int k = s < cfg.small_below_bdp * bdp ? 0 : (s < cfg.large_from_bdp * bdp ? 1 : 2);
    c[k].files.push_back(i);
    c[k].bytes += sizes[i];
    total += sizes[i];
  }

  auto too_small = [&](const ChunkPlan& p) {
    return !p.files.empty() && p.files.size() < cfg.min_chunk_files &&
           double(p.bytes) < cfg.min_chunk_share * double(total);
  };
  auto merge = [&](int from, int into) {
    auto& dst = c[into];
    dst.files.insert(dst.files.end(), c[from].files.begin(), c[from].files.end());
    dst.bytes += c[from].bytes;
    c[from].files.clear();
    c[from].bytes = 0;
  };
  // Small and Large have one neighbour each: Medium, or across it when Medium
  // is empty. Medium joins whichever non-empty neighbour is closer in average
  // file size (on a log scale: sizes span orders of magnitude).
  for (int k : {0, 2}) {
    if (!too_small(c[k])) continue;
    int other = k == 0 ? 2 : 0;
    if (!c[1].files.empty()) merge(k, 1);
    else if (!c[other].files.empty()) merge(k, other);
  }
  if (too_small(c[1])) {
    bool s = !c[0].files.empty(), l = !c[2].files.empty();
    if (s || l) {
      double m = std::log(c[1].avg_size() + 1);
      double ds = s ? std::abs(m - std::log(c[0].avg_size() + 1)) : INFINITY;
      double dl = l ? std::abs(m - std::log(c[2].avg_size() + 1)) : INFINITY;
      merge(1, ds <= dl ? 0 : 2);
    }
  }

  std::vector<ChunkPlan> out;
  for (auto& p : c) {
    if (p.files.empty()) continue;
    double mean = p.avg_size(), var = 0;
    for (size_t i : p.files) var += (double(sizes[i]) - mean) * (double(sizes[i]) - mean);
    p.size_sd = std::sqrt(var / double(p.files.size()));
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace xfer
