// Dataset partitioning into Small / Medium / Large chunks by the
// bandwidth-delay product (energy-aware-transfer-algorithms.txt §2.3,
// partitionFiles and mergeChunks of Algorithm 1; http-sla §4.1).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "xfer/params.h"

namespace xfer {

struct PartitionConfig {
  uint64_t bdp_bytes = 0;
  // Bounds relative to the BDP. The papers do not fix them; these follow their
  // reasoning: pipelining pays while a file is smaller than the BDP (http-sla
  // §3 lesson 2), so Small is below half a BDP; parallelism pays for files many
  // times the BDP, so Large starts at 10 BDP.
  double small_below_bdp = 0.5;
  double large_from_bdp = 10.0;
  // mergeChunks: a chunk with fewer files than this AND less than this share
  // of the dataset's bytes cannot use its own cc / pp and joins a neighbour.
  size_t min_chunk_files = 3;
  double min_chunk_share = 0.05;
};

// Returns the non-empty chunks, ordered Small, Medium, Large.
std::vector<ChunkPlan> partition_files(const std::vector<uint64_t>& sizes, const PartitionConfig& cfg);

}  // namespace xfer
