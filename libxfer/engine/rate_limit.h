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
  // How long from now until the bucket holds `bytes` (0: it does). What a
  // full bucket holds (the burst) is the most ever waited for; 0 bytes: until
  // it is no longer below zero.
  uint64_t wait_us(uint64_t now_us, double bytes = 0);
  double burst() const { return rate_ * kBurstSeconds; }
  // A control interval begins: what the bucket kept from under the rate in
  // the last one is dropped (a debt stays), so that no interval moves more
  // than the rate over it and a write or so. The cap is judged per interval
  // as the floor is (issue 54: a ramp's look at 113 Mbit/s filled the bucket,
  // and the next half-second look moved 178 under a cap of 165).
  // `keep`: what writes held back wait for the bucket to hold (they are not
  // under the rate: they wait to be handed over whole) is kept, up to that.
  void new_interval(uint64_t now_us, double keep = 0);
  // When a write last found the bucket empty (0: never): the cap is what
  // holds the job's streams back only while this is recent. A write that
  // waits only for the credit new_interval dropped does not count: the
  // streams were under the rate.
  uint64_t held_us() const { return held_us_; }

  static constexpr double kBurstSeconds = 0.05;

 private:
  void refill(uint64_t now_us);
  double rate_ = 0, tokens_ = 0;
  double kept_ = 0;  // the tokens had no interval begun: tokens_ plus the credit dropped since
  uint64_t last_us_ = 0, held_us_ = 0;
};

}  // namespace xfer
