#include "link_model.h"

#include <algorithm>
#include <cmath>

namespace linkemu {

LinkModel::LinkModel(const LinkParams& p, uint64_t seed) : p_(p), rng_(seed) {
  if (p_.queue_bytes == 0) p_.queue_bytes = std::max<uint64_t>(64 * 1024, uint64_t(p_.rate_bps / 8 * 2 * p_.delay_s));
}

uint64_t LinkModel::backlog_bytes(uint64_t now_ns) const {
  if (busy_until_ns_ <= now_ns) return 0;
  return uint64_t(double(busy_until_ns_ - now_ns) * p_.rate_bps / 8e9);
}

std::optional<uint64_t> LinkModel::admit(uint64_t now_ns, uint64_t bytes) {
  if (p_.loss > 0 && unit_(rng_) < p_.loss) {
    ++c_.dropped_loss;
    return std::nullopt;
  }
  uint64_t backlog = backlog_bytes(now_ns);
  if (backlog + bytes > p_.queue_bytes) {
    ++c_.dropped_queue;
    return std::nullopt;
  }
  c_.max_backlog_bytes = std::max(c_.max_backlog_bytes, backlog + bytes);
  uint64_t start = std::max(now_ns, busy_until_ns_);
  busy_until_ns_ = start + uint64_t(std::llround(double(bytes) * 8e9 / p_.rate_bps));
  double delay = p_.delay_s;
  if (p_.jitter_s > 0) delay = std::max(0.0, delay + (2 * unit_(rng_) - 1) * p_.jitter_s);
  uint64_t at = busy_until_ns_ + uint64_t(std::llround(delay * 1e9));
  at = std::max(at, last_deliver_ns_);
  last_deliver_ns_ = at;
  ++c_.packets;
  c_.bytes += bytes;
  return at;
}

}  // namespace linkemu
