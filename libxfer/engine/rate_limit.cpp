#include "rate_limit.h"

#include <algorithm>
#include <cmath>

namespace xfer {

void RateLimit::set_rate(double Bps, uint64_t now_us) {
  refill(now_us);
  rate_ = std::max(0.0, Bps);
  // A lowered rate keeps what is owed; what is in hand is at most the new burst.
  tokens_ = std::min(tokens_, burst());
  kept_ = std::min(kept_, burst());
  if (rate_ <= 0) tokens_ = kept_ = 0;
}

void RateLimit::new_interval(uint64_t now_us, double keep) {
  refill(now_us);
  tokens_ = std::min(tokens_, std::max(0.0, keep));
}

void RateLimit::refill(uint64_t now_us) {
  if (last_us_ && now_us > last_us_ && rate_ > 0) {
    const double add = rate_ * double(now_us - last_us_) / 1e6;
    tokens_ = std::min(burst(), tokens_ + add);
    kept_ = std::min(burst(), kept_ + add);
  }
  if (now_us > last_us_ || !last_us_) last_us_ = now_us;
}

bool RateLimit::take(size_t bytes, uint64_t now_us) {
  if (rate_ <= 0) return true;
  refill(now_us);
  if (tokens_ < 0) {
    if (kept_ < 0) held_us_ = now_us;
    return false;
  }
  tokens_ -= double(bytes);
  kept_ -= double(bytes);
  return true;
}

uint64_t RateLimit::wait_us(uint64_t now_us, double bytes) {
  if (rate_ <= 0) return 0;
  refill(now_us);
  const double want = std::clamp(bytes, 0.0, burst());
  return tokens_ >= want ? 0 : uint64_t(std::ceil((want - tokens_) / rate_ * 1e6));
}

}  // namespace xfer
