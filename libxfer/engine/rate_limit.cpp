#include "rate_limit.h"

#include <algorithm>
#include <cmath>

namespace xfer {

void RateLimit::set_rate(double Bps, uint64_t now_us) {
  refill(now_us);
  rate_ = std::max(0.0, Bps);
  // A lowered rate keeps what is owed; what is in hand is at most the new burst.
  tokens_ = std::min(tokens_, rate_ * kBurstSeconds);
  if (rate_ <= 0) tokens_ = 0;
}

void RateLimit::refill(uint64_t now_us) {
  if (last_us_ && now_us > last_us_ && rate_ > 0)
    tokens_ = std::min(rate_ * kBurstSeconds, tokens_ + rate_ * double(now_us - last_us_) / 1e6);
  if (now_us > last_us_ || !last_us_) last_us_ = now_us;
}

bool RateLimit::take(size_t bytes, uint64_t now_us) {
  if (rate_ <= 0) return true;
  refill(now_us);
  if (tokens_ < 0) return false;
  tokens_ -= double(bytes);
  count(double(bytes), now_us);
  return true;
}

void RateLimit::count(double bytes, uint64_t now_us) {
  if (!slot_us_ || now_us >= slot_us_ + 2 * kSlotUs) {
    prev_bytes_ = 0, slot_bytes_ = 0, slot_us_ = now_us;
  } else if (now_us >= slot_us_ + kSlotUs) {
    prev_bytes_ = slot_bytes_, slot_bytes_ = 0, slot_us_ += kSlotUs;
  }
  slot_bytes_ += bytes;
}

double RateLimit::recent_Bps(uint64_t now_us) const {
  if (!slot_us_ || now_us >= slot_us_ + 2 * kSlotUs) return 0;
  if (now_us >= slot_us_ + kSlotUs)  // the current slot is over: it is the one before now
    return slot_bytes_ / (double(now_us - slot_us_) / 1e6);
  return (prev_bytes_ + slot_bytes_) / (double(kSlotUs + (now_us - slot_us_)) / 1e6);
}

uint64_t RateLimit::wait_us(uint64_t now_us) {
  if (rate_ <= 0) return 0;
  refill(now_us);
  return tokens_ >= 0 ? 0 : uint64_t(std::ceil(-tokens_ / rate_ * 1e6));
}

}  // namespace xfer
