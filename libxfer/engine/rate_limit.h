// A job's rate cap over all its requests at once: a token bucket that every
// body write draws from. A request that finds it empty is paused
// (CURL_WRITEFUNC_PAUSE; libcurl keeps what it was handed and stops reading
// the socket, so the sender is held by TCP's window) until the bucket has
// refilled. Private to the engine; unit-tested alone (rate_limit_test).
//
// Why not libcurl's own limit (CURLOPT_MAX_RECV_SPEED_LARGE): it is per
// request and taken when the request starts (curl issue 6162), so a job's
// cap had to be split among the requests in flight at each start. Requests
// started one after another got the cap, half of it, a third...: 6 requests
// of a job capped at 50 Mbit/s held 367 Mbit/s of limits between them, and
// one user's job moved 148 Mbit/s on a 50 Mbit/s allotment. A lowered cap
// reached nothing in flight, a raised one only re-issued requests.
#pragma once

#include <cstddef>
#include <cstdint>

namespace xfer {

class RateLimit {
 public:
  // bytes/s; 0: no limit. The bucket holds at most burst_s of the rate.
  void set_rate(double Bps, uint64_t now_us);
  double rate() const { return rate_; }
  bool active() const { return rate_ > 0; }
  // `bytes` arrive now: true when they may be taken (the bucket may go below
  // zero by them: a write is never split); false: wait (wait_us).
  bool take(size_t bytes, uint64_t now_us);
  // How long from now until the bucket is above zero again (0: it is).
  uint64_t wait_us(uint64_t now_us);
  // When a write last found the bucket empty while it was deep (0: never):
  // the cap is what holds the job's streams back only while this is recent.
  uint64_t held_us() const { return held_us_; }

  // The bucket's depth follows the cap. Once the cap has held a write back
  // it holds kBurstSeconds of the rate, a round trip's burst of the
  // streams' windows (at 0.01 s, paused bursts moved a floor job under its
  // cap: 90.7% of its intervals in band against 94.4%). Until then, and
  // kDeepUs after the last write it held, it holds kColdSeconds: a job
  // ramping under its cap carries no more than that into the look where it
  // crosses it (at 0.05 s a floor job capped at 165 Mbit/s moved 178 over
  // that 0.54-s look, past its band). A write held by the shallow bucket
  // deepens it but is not held_us: bursts under the cap empty it.
  static constexpr double kBurstSeconds = 0.05, kColdSeconds = 0.01;
  static constexpr uint64_t kDeepUs = 500'000;

 private:
  void refill(uint64_t now_us);
  bool deep(uint64_t now_us) const { return deep_us_ && now_us < deep_us_ + kDeepUs; }
  double depth(uint64_t now_us) const { return rate_ * (deep(now_us) ? kBurstSeconds : kColdSeconds); }
  double rate_ = 0, tokens_ = 0;
  uint64_t last_us_ = 0, held_us_ = 0, deep_us_ = 0;
};

}  // namespace xfer
