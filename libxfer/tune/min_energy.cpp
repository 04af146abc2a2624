// MinE, Minimum Energy (energy-aware-transfer-algorithms.txt §2.3, Algorithm 1;
// http-sla-transfer-algorithms.txt §4.1, Algorithm 1). For each chunk, Small
// to Large, with avail = maxChannel at the start:
//
//   pp = ceil(BDP / avg)
//   p  = max(min(ceil(BDP / buf), ceil(avg / buf)), 1)
//   cc = min(ceil(BDP / avg), ceil((avail + 1) / 2));   avail -= cc
//
// Small chunks get high pp and most channels (pipelining and concurrency are
// what save energy on small files); Large keeps a single channel (more
// concurrent large transfers only burn power) and relies on p when the TCP
// buffer is below the BDP. Chunks run concurrently. The application-layer plan
// is fixed at start; the kernel layer (cores, frequency) is left untouched.
#include "min_energy.h"

#include <algorithm>
#include <cmath>

namespace xfer {
namespace {

constexpr int kMaxPipelining = 64;  // HTTP/2 servers commonly allow 100-128 streams

int ceil_div(double a, double b) { return b <= 0 ? 1 : static_cast<int>(std::ceil(a / b)); }

}  // namespace

int MinEnergyTuner::pipelining(uint64_t bdp, double avg) {
  return std::clamp(ceil_div(double(bdp), avg), 1, kMaxPipelining);
}

int MinEnergyTuner::parallelism(uint64_t bdp, double avg, uint64_t buf) {
  return std::max(std::min(ceil_div(double(bdp), double(buf)), ceil_div(avg, double(buf))), 1);
}

int MinEnergyTuner::concurrency(uint64_t bdp, double avg, int avail) {
  return std::max(1, std::min(ceil_div(double(bdp), avg), (avail + 1 + 1) / 2));
}

Params MinEnergyTuner::init(const JobInfo& info) {
  Params out;
  int avail = std::max(1, info.max_channels);
  for (const ChunkPlan& c : info.chunks) {  // already ordered Small, Medium, Large
    double avg = std::max(1.0, c.avg_size());
    ChunkParams cp;
    cp.pp = pipelining(info.bdp_bytes, avg);
    cp.p = parallelism(info.bdp_bytes, avg, info.tcp_buf_bytes);
    cp.cc = c.kind == ChunkKind::Large ? 1 : concurrency(info.bdp_bytes, avg, avail);
    avail = std::max(1, avail - cp.cc);
    out.chunks.push_back(cp);
  }
  out.reason = "min-energy: MinE formulas from BDP " + std::to_string(info.bdp_bytes) + " B, buffer " +
               std::to_string(info.tcp_buf_bytes) + " B";
  return out;
}

std::optional<Params> MinEnergyTuner::decide(const Observation&) { return std::nullopt; }

}  // namespace xfer
