// One direction of an emulated WAN link: a bottleneck of `rate` bits/s fed
// by a tail-drop queue of `queue_bytes`, then a propagation delay (plus
// optional jitter, never reordering), and random loss. Pure arithmetic on
// times given by the caller, so it is tested without packets.
#pragma once

#include <cstdint>
#include <optional>
#include <random>

namespace linkemu {

struct LinkParams {
  double rate_bps = 1e9;
  double delay_s = 0;
  double jitter_s = 0;        // uniform in [-jitter, +jitter], clipped at 0 delay
  double loss = 0;            // probability a packet is dropped (0..1)
  uint64_t queue_bytes = 0;   // bottleneck buffer; 0 means one BDP
};

struct LinkCounters {
  uint64_t packets = 0, bytes = 0, dropped_queue = 0, dropped_loss = 0;
  uint64_t max_backlog_bytes = 0;
};

class LinkModel {
 public:
  LinkModel(const LinkParams& p, uint64_t seed);
  // A packet of `bytes` arrives at now_ns: its delivery time, or nullopt if dropped.
  std::optional<uint64_t> admit(uint64_t now_ns, uint64_t bytes);
  uint64_t backlog_bytes(uint64_t now_ns) const;
  const LinkCounters& counters() const { return c_; }
  const LinkParams& params() const { return p_; }

 private:
  LinkParams p_;
  std::mt19937_64 rng_;
  std::uniform_real_distribution<double> unit_{0.0, 1.0};
  uint64_t busy_until_ns_ = 0;    // when the bottleneck has sent what it holds
  uint64_t last_deliver_ns_ = 0;  // deliveries stay in order
  LinkCounters c_;
};

}  // namespace linkemu
