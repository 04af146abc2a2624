// What the SLA policies share: MinE's per-chunk pipelining and parallelism
// (every algorithm of both papers starts from them: "calculateParameters()"),
// HTEE's chunk weights, and the two ways channels are dealt to chunks.
#pragma once

#include <vector>

#include "xfer/tuner.h"

namespace xfer::tune {

int ceil_div(double a, double b);

// energy-aware Alg. 1 lines 8-9 (http-sla Alg. 1):
//   pp = ceil(BDP / avg),  p = max(min(ceil(BDP / buf), ceil(avg / buf)), 1)
int pipelining(uint64_t bdp, double avg);
int parallelism(uint64_t bdp, double avg, uint64_t buf);
// Every chunk with those pp and p, and cc = 1.
std::vector<ChunkParams> base_chunks(const StartFacts& info);

// energy-aware Alg. 2 lines 6-12: w_i = log(size_i) * log(count_i), normalised.
// A chunk of one file has log(1) = 0; it still gets a floor weight so that it
// is not starved (the paper's floor(maxChannel * w) would give it none).
std::vector<double> chunk_weights(const std::vector<ChunkPlan>& chunks);

// Channels for the chunks still running (active[i]): floor(total * w_i),
// the rest by largest remainder; every active chunk gets at least one,
// finished ones none. `large_cap` > 0 holds Large to that many (MinE, SLAEE).
std::vector<int> split_by_weight(int total, const std::vector<ChunkPlan>& chunks, const std::vector<double>& w,
                                 const std::vector<bool>& active, int large_cap = 0);

// http-sla Alg. 2: channel i goes to Large, Medium, Small in turn (kinds
// missing or finished are skipped).
std::vector<int> deal_round_robin(int total, const std::vector<ChunkPlan>& chunks, const std::vector<bool>& active);

// Chunks not finished in an observation (all of them before the first one).
std::vector<bool> active_chunks(const Observation* obs, size_t n);

// A floor judged as the job's average: the rate that brings the job, from
// its start (obs.t_s) and what it has moved, to target_bps by the time the
// floor allows it; at least the target, at most target x (1 + make_up).
double floor_need_bps(double target_bps, const Observation& obs, double make_up);

// The chunks running now into *active; true when one that ran at the last
// call has finished since (false at the first call, *active empty).
bool chunks_finished(const Observation& obs, size_t n, std::vector<bool>* active);

// The running chunk with the most bytes left (n when none is running).
size_t most_left(const Observation& obs, size_t n);

// A receive-rate cap that holds the job back: the rate within 10% of it.
bool cap_binds(double cap_bps, double thr_bps);
// A cap already at `held_bps` (within 2%): setting it again changes nothing.
bool cap_at(double cap_bps, double held_bps);

// Files of the running chunks not yet done (those in flight included).
int files_left(const Observation& obs);

// What one channel carries of files of `file_bytes` on a connection already
// open: a request's round trip, then the file at `window_bytes` a round trip
// (window_bytes <= 0: no bound but the round trip).
double open_channel_bps(double file_bytes, double rtt_s, double window_bytes);
// The window that explains a channel seen to carry `seen_bps` of files of
// `file_bytes` (open_channel_bps's inverse); 0 where the round trip alone
// explains it (no window bound seen).
double window_seen(double seen_bps, double file_bytes, double rtt_s);

// The margin a floor's receive-rate cap holds over the need: kLeast, and a
// step more (to kMost) after each look that fell under the floor while the
// cap bound. On a lossy path each loss halves a stream's window under the
// cap, and at +3% a long-tailed job's 110-Mbit/s floor came out at 103-109
// in a fifth of its intervals (floor-hla, 250 Mbit/s, 45 ms, 0.02% loss); a
// path that holds steady keeps the least. The rate held never goes past the
// floor's band (kBandTop) for it.
// A path whose flows show a loss, at any look, takes the most at once: a
// job of a few seconds has no dips to learn from (floor-hla's long-tailed
// job: 9 half-second looks, and the dip that widened the margin was already
// a miss in 5 runs of 9).
struct CapMargin {
  static constexpr double kLeast = 0.03, kStep = 0.02, kMost = 0.09;
  double value = kLeast;
  // After a look: true when the margin was raised.
  bool note(const Observation& obs, double floor_bps);
  // The rate a cap holds for `need_bps`: need x (1 + value), under
  // floor x (1 + band_top) unless the least margin is over it already.
  double held(double need_bps, double floor_bps, double band_top) const;
};

// The channels a floor's files left need (every floor policy: issue 54).
// Under a cap, what the channels would carry is hidden, and as the files
// left get smaller (largest go first) each carries less, a round trip a
// file: channels for them are added before the rate falls. note() reads
// the window a channel showed at a look that measured it (not settling,
// not cold, not under a cap that binds, not the tail); want() is the
// channels `rate_bps` takes on the files left at that window, kMargin over.
struct LeftChannels {
  static constexpr double kMargin = 1.25;  // as the start's (ThroughputTargetTuner::kStartMargin)
  double window_bytes = 0;  // what a channel moves a round trip, as last measured
  bool known = false;
  double channel_bps = 0;   // a channel's rate on the files left (the last want())
  // The path's RTT as the job's flows measure it, else `fallback_s`.
  static double rtt_s(const Observation& obs, double fallback_s);
  void note(const Observation& obs, bool skip, double rtt_s);
  // 0 when nothing has been measured; at most `total` + the files left and
  // max_channels.
  int want(const Observation& obs, double rate_bps, double rtt_s, int total, int max_channels);
};

// Puts per-chunk cc into params (p and pp kept).
void set_cc(Params& p, const std::vector<int>& cc);

}  // namespace xfer::tune
