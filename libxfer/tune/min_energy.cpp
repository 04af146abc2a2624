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
// buffer is below the BDP. Chunks run concurrently; the application-layer
// plan is fixed at start, as in the paper.
//
// Over HTTP/2 (StartFacts::multiplexed) this project departs from the paper.
// The paper's pp pipelines requests on HTTP/1.1, where a connection still
// sends one response at a time, so ceil(BDP / avg) files in flight take cc
// connections. On HTTP/2 a connection's pp streams are in flight together:
// one channel already holds pp >= ceil(BDP / avg) of them, and more channels
// add TCP and TLS connections that carry nothing the first could not. So a
// chunk gets only the channels its pp streams leave short of ceil(BDP / avg),
// and never fewer than the TCP buffers need to hold the BDP (ceil(BDP / buf)
// connections, p to a channel).
// Measured on wan-tls html (1000 x ~100 KB, 500 Mbit/s, 40 ms): the paper's
// cc=17 x pp=25 used 0.68 s of CPU at 283 Mbit/s, one connection with 16
// streams 0.45 s at 263 Mbit/s.
//
// Large files on a lossy path: a second departure, for the end-system energy
// this policy minimises. The paper keeps one stream per large file and the
// plan fixed. Where that stream is loss-bound, the job draws the machine's
// idle power for as long as the stream is slow: on lossy-wan (500 Mbit/s,
// 80 ms, 0.02% loss) one stream carried 2 x 222 MB at 210 Mbit/s with 200-290
// retransmits per MB, and end-system energy was 0.92x the least peer's. So
// once, when the Large chunk moves less than kLossBoundShare of what the link
// (less other traffic and the job's other chunks) leaves it, with losses
// seen, its p grows to as many streams as would fill that room at the
// stream's rate (2x to 8x; lossy-wan: 203 of 500 Mbit/s, p 1 -> 3); the next interval that measures the new p (not the
// settling one) keeps it only if the chunk's throughput rose by kKeepGain,
// else p goes back. A link rate that is only assumed (too high) can start
// the probe; the measurement undoes it.
// The probe does not wait for whole intervals: where the RTT is known, the
// loop looks once slow start is over (12 RTTs + 0.3 s, the settling look,
// which decides nothing) and again after 10 RTTs (at least 1 s) of the
// stream's own pace, which decides; after a change the same two looks judge
// it. Waiting one 5-s interval at p=1, as before, kept lossy-wan's video set
// (2 x 222 MB) at 202 Mbit/s for 5 of its 12 s (end-system 0.73x aria2c's).
//
// Kernel layer (KernelPlan::Least): cores start at the floor, since an
// online core draws its idle power whether the transfer needs it or not;
// from the second interval, one core more is tried while the online cores
// are busy and kept only if the joules per byte fall, and the frequency steps
// down while they do not rise; a step that does not pay is undone. Without
// an energy figure there is nothing to compare, and the kernel layer stays
// where it started (said once in the log).
#include "min_energy.h"

#include <algorithm>

#include <fmt/format.h>

#include "common.h"
#include "xfer/log.h"

namespace xfer {

int MinEnergyTuner::concurrency(uint64_t bdp, double avg, int avail) {
  return std::max(1, std::min(tune::ceil_div(double(bdp), avg), (avail + 1 + 1) / 2));
}

int MinEnergyTuner::multiplexed_channels(const StartFacts& info, double avg, int pp, int p) {
  int in_flight = tune::ceil_div(double(info.bdp_bytes), avg);
  int connections = info.tcp_buf_bytes ? tune::ceil_div(double(info.bdp_bytes), double(info.tcp_buf_bytes)) : 1;
  return std::max({1, tune::ceil_div(double(in_flight), double(pp)),
                   tune::ceil_div(double(connections), double(std::max(1, p)))});
}

Params MinEnergyTuner::init(const StartFacts& info) {
  Params out;
  out.chunks = tune::base_chunks(info);
  int avail = std::max(1, info.max_channels);
  for (size_t i = 0; i < info.chunks.size(); ++i) {  // already ordered Small, Medium, Large
    const ChunkPlan& c = info.chunks[i];
    ChunkParams& p = out.chunks[i];
    const double avg = std::max(1.0, c.avg_size());
    p.cc = c.kind == ChunkKind::Large ? 1 : concurrency(info.bdp_bytes, avg, avail);
    if (info.multiplexed && p.pp > 1) p.cc = std::min(p.cc, multiplexed_channels(info, avg, p.pp, p.p));
    avail = std::max(1, avail - p.cc);
  }
  bandwidth_bps_ = info.bandwidth_bps;
  bool large = std::any_of(info.chunks.begin(), info.chunks.end(),
                           [](const ChunkPlan& c) { return c.kind == ChunkKind::Large; });
  quick_ = large && bandwidth_bps_ > 0 && info.rtt_s > 0;
  settle_s_ = std::min(kLookCapS, kSettleRtts * info.rtt_s + kSettleFloorS);
  measure_s_ = std::clamp(kMeasureRtts * info.rtt_s, kMeasureFloorS, kLookCapS);
  look_ = quick_ ? Look::Settle : Look::Interval;
  out.reason = "min-energy: MinE formulas from BDP " + std::to_string(info.bdp_bytes) + " B, buffer " +
               std::to_string(info.tcp_buf_bytes) + " B" +
               (info.multiplexed ? "; HTTP/2: channels only where pp streams fall short of BDP/avg" : "");
  std::string k = kernel_.init(info.kernel, kernel_enabled_, tune::KernelPlan::Goal::Least, out.total_channels(), out);
  if (!k.empty()) out.reason += "; " + k;
  current_ = out;
  return out;
}

std::optional<double> MinEnergyTuner::next_look_s() const {
  switch (look_) {
    case Look::Settle: return settle_s_;
    case Look::Measure: return measure_s_;
    case Look::Interval: break;
  }
  return std::nullopt;
}

std::optional<Params> MinEnergyTuner::try_more_streams(const Observation& obs) {
  const Look looked = look_;
  look_ = Look::Interval;
  if (probe_ == Probe::Done || bandwidth_bps_ <= 0) return std::nullopt;
  if (looked == Look::Settle) {  // slow start and set-up: measure what follows
    look_ = Look::Measure;
    return std::nullopt;
  }
  if (probe_ == Probe::Trying) {
    if (obs.settling) return std::nullopt;  // the interval of the change itself
    probe_ = Probe::Done;
    if (probe_chunk_ >= obs.chunks.size() || probe_chunk_ >= current_.chunks.size()) return std::nullopt;
    const ChunkObservation& c = obs.chunks[probe_chunk_];
    if (c.finished || c.throughput_bps >= kKeepGain * probe_from_bps_) {
      log::info("min-energy: large files at p={}: {:.0f} Mbit/s (from {:.0f}); kept", current_.chunks[probe_chunk_].p,
                c.throughput_bps / 1e6, probe_from_bps_ / 1e6);
      return std::nullopt;
    }
    current_.chunks[probe_chunk_].p = probe_from_p_;
    current_.reason = fmt::format("min-energy: more streams for large files did not pay ({:.0f} Mbit/s, from {:.0f}); "
                                  "back to p={}",
                                  c.throughput_bps / 1e6, probe_from_bps_ / 1e6, probe_from_p_);
    return current_;
  }
  if (obs.near_end) return std::nullopt;
  double others = 0;
  for (const ChunkObservation& c : obs.chunks)
    if (c.kind != ChunkKind::Large && !c.finished) others += c.throughput_bps;
  double room = bandwidth_bps_ * (1 - std::clamp(obs.ext_load.value_or(0.0), 0.0, 1.0)) - others;
  for (size_t i = 0; i < obs.chunks.size() && i < current_.chunks.size(); ++i) {
    const ChunkObservation& c = obs.chunks[i];
    if (c.kind != ChunkKind::Large || c.finished || !c.flow || c.flow->retrans_per_mb <= 0 || c.throughput_bps <= 0 ||
        c.throughput_bps >= kLossBoundShare * room)
      continue;
    probe_ = Probe::Trying;
    probe_chunk_ = i;
    probe_from_p_ = std::max(1, current_.chunks[i].p);
    probe_from_bps_ = c.throughput_bps;
    // As many streams as would fill the room at the rate each has now.
    int times = std::clamp(tune::ceil_div(kFillShare * room, c.throughput_bps), 2, kMaxStreamsFactor);
    current_.chunks[i].p = times * probe_from_p_;
    if (quick_) look_ = Look::Settle;
    current_.reason = fmt::format("min-energy: large files at {:.0f} of the {:.0f} Mbit/s left to them, {:.0f} "
                                  "retransmits/MB: p {} -> {} (a loss-bound stream keeps the machine on longer)",
                                  c.throughput_bps / 1e6, room / 1e6, c.flow->retrans_per_mb, probe_from_p_,
                                  current_.chunks[i].p);
    return current_;
  }
  return std::nullopt;
}

std::optional<Params> MinEnergyTuner::decide(const Observation& obs) {
  ++intervals_;
  std::optional<double> energy = obs.energy(kEnergy);
  joules_ += energy.value_or(0);
  bytes_ += obs.bytes_interval;
  if (auto more = try_more_streams(obs)) return more;
  if (look_ != Look::Interval) return std::nullopt;  // the probe's quick looks: one change judged at a time
  // The first interval holds connection set-up and slow start; the tail
  // (every file taken, channels draining) says little about the knobs.
  if (intervals_ < 2 || obs.near_end || obs.bytes_interval == 0) return std::nullopt;
  if (!energy || *energy <= 0) {
    if (!warned_no_energy_ && kernel_enabled_)
      log::warn("min-energy: no energy figures; the kernel layer stays where it started");
    warned_no_energy_ = true;
    return std::nullopt;
  }
  double cost = *energy / double(obs.bytes_interval);
  std::optional<tune::KernelStep> step = kernel_.step(true, cost, current_.total_channels(), current_, obs.cpu_pct);
  if (!step) return std::nullopt;
  current_.reason = "min-energy: " + step->reason;
  return current_;
}

nlohmann::json MinEnergyTuner::summary() const {
  return {{"kernel", kernel_.summary()},
          {"joules", joules_},
          {"joules_per_gb", bytes_ ? joules_ / (double(bytes_) / 1e9) : 0.0}};
}

}  // namespace xfer
