#include "common.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace xfer::tune {
namespace {
constexpr int kMaxPipelining = 64;  // HTTP/2 servers commonly allow 100-128 streams
}

int ceil_div(double a, double b) { return b <= 0 ? 1 : static_cast<int>(std::ceil(a / b)); }

int pipelining(uint64_t bdp, double avg) { return std::clamp(ceil_div(double(bdp), avg), 1, kMaxPipelining); }

int parallelism(uint64_t bdp, double avg, uint64_t buf) {
  return std::max(std::min(ceil_div(double(bdp), double(buf)), ceil_div(avg, double(buf))), 1);
}

std::vector<ChunkParams> base_chunks(const StartFacts& info) {
  std::vector<ChunkParams> out;
  for (const ChunkPlan& c : info.chunks) {
    double avg = std::max(1.0, c.avg_size());
    out.push_back({1, parallelism(info.bdp_bytes, avg, info.tcp_buf_bytes), pipelining(info.bdp_bytes, avg)});
  }
  return out;
}

std::vector<double> chunk_weights(const std::vector<ChunkPlan>& chunks) {
  std::vector<double> w;
  for (const ChunkPlan& c : chunks)
    w.push_back(std::log(std::max<double>(2, double(c.bytes))) * std::log(std::max<double>(2, double(c.files.size()))));
  double total = std::accumulate(w.begin(), w.end(), 0.0);
  for (double& x : w) x = total > 0 ? x / total : 1.0 / double(w.size());
  return w;
}

std::vector<int> split_by_weight(int total, const std::vector<ChunkPlan>& chunks, const std::vector<double>& w,
                                 const std::vector<bool>& active, int large_cap) {
  size_t n = chunks.size();
  std::vector<int> cc(n, 0);
  double wsum = 0;
  int nactive = 0;
  for (size_t i = 0; i < n; ++i)
    if (active[i]) wsum += w[i], ++nactive;
  if (nactive == 0) return cc;
  total = std::max(total, nactive);
  std::vector<double> rem(n, -1);
  int given = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!active[i]) continue;
    double share = wsum > 0 ? double(total) * w[i] / wsum : double(total) / nactive;
    cc[i] = std::max(1, int(std::floor(share)));
    rem[i] = share - std::floor(share);
    given += cc[i];
  }
  auto capped = [&](size_t i) { return large_cap > 0 && chunks[i].kind == ChunkKind::Large && cc[i] >= large_cap; };
  // Large over its cap gives its surplus back.
  for (size_t i = 0; i < n; ++i)
    if (active[i] && large_cap > 0 && chunks[i].kind == ChunkKind::Large && cc[i] > large_cap)
      given -= cc[i] - large_cap, cc[i] = large_cap;
  while (given < total) {  // largest remainder first, Small before Large on ties
    size_t best = n;
    for (size_t i = 0; i < n; ++i)
      if (active[i] && !capped(i) && (best == n || rem[i] > rem[best])) best = i;
    if (best == n) break;  // only a capped Large is left
    ++cc[best], ++given;
    rem[best] -= 1;
  }
  while (given > total) {  // the floor of one each overshot: take from the largest
    size_t big = size_t(std::max_element(cc.begin(), cc.end()) - cc.begin());
    if (cc[big] <= 1) break;
    --cc[big], --given;
  }
  return cc;
}

std::vector<int> deal_round_robin(int total, const std::vector<ChunkPlan>& chunks, const std::vector<bool>& active) {
  std::vector<int> cc(chunks.size(), 0);
  const ChunkKind order[] = {ChunkKind::Large, ChunkKind::Medium, ChunkKind::Small};
  std::vector<size_t> ring;
  for (ChunkKind k : order)
    for (size_t i = 0; i < chunks.size(); ++i)
      if (active[i] && chunks[i].kind == k) ring.push_back(i);
  if (ring.empty()) return cc;
  for (int ch = 0; ch < std::max<int>(total, int(ring.size())); ++ch) ++cc[ring[size_t(ch) % ring.size()]];
  return cc;
}

std::vector<bool> active_chunks(const Observation* obs, size_t n) {
  std::vector<bool> a(n, true);
  if (obs)
    for (size_t i = 0; i < n && i < obs->chunks.size(); ++i) a[i] = !obs->chunks[i].finished;
  return a;
}

bool chunks_finished(const Observation& obs, size_t n, std::vector<bool>* active) {
  std::vector<bool> now = active_chunks(&obs, n);
  bool finished = false;
  for (size_t i = 0; i < now.size() && i < active->size(); ++i) finished |= (*active)[i] && !now[i];
  *active = std::move(now);
  return finished;
}

size_t most_left(const Observation& obs, size_t n) {
  std::vector<bool> active = active_chunks(&obs, n);
  size_t pick = n;
  uint64_t most = 0;
  for (size_t i = 0; i < obs.chunks.size() && i < n; ++i)
    if (active[i] && obs.chunks[i].bytes_left() > most) most = obs.chunks[i].bytes_left(), pick = i;
  return pick;
}

double floor_need_bps(double target_bps, const Observation& obs, double make_up) {
  if (target_bps <= 0 || obs.bytes_total == 0 || obs.bytes_done >= obs.bytes_total) return target_bps;
  const double left_s = double(obs.bytes_total) * 8 / target_bps - obs.t_s;
  const double most = target_bps * (1 + make_up);
  if (left_s <= 0) return most;
  const double pace = double(obs.bytes_total - obs.bytes_done) * 8 / left_s;
  return std::clamp(pace, target_bps, most);
}

int files_left(const Observation& obs) {
  int n = 0;
  for (const ChunkObservation& c : obs.chunks)
    if (!c.finished) n += int(c.files_left());
  return n;
}

double open_channel_bps(double file_bytes, double rtt_s, double window_bytes) {
  if (file_bytes <= 0 || rtt_s <= 0) return 0;
  return file_bytes * 8 / (rtt_s * (1 + (window_bytes > 0 ? file_bytes / window_bytes : 0)));
}

double window_seen(double seen_bps, double file_bytes, double rtt_s) {
  if (seen_bps <= 0 || file_bytes <= 0 || rtt_s <= 0) return 0;
  const double rounds = file_bytes * 8 / (rtt_s * seen_bps);  // 1 + file / window
  return rounds > 1 ? file_bytes / (rounds - 1) : 0;
}

double LeftChannels::rtt_s(const Observation& obs, double fallback_s) {
  return obs.flow && obs.flow->rtt_ms > 0 ? obs.flow->rtt_ms / 1e3 : fallback_s;
}

void LeftChannels::note(const Observation& obs, bool skip, double rtt) {
  const int channels = obs.params.total_channels();
  const int files = files_left(obs);
  if (skip || obs.settling || channels <= 0 || files <= 0 || obs.throughput_bps <= 0 ||
      cap_binds(obs.params.rate_cap_bps, obs.throughput_bps))
    return;
  const double per = obs.throughput_bps / std::min(channels, files);  // a channel without a file carries nothing
  window_bytes = window_seen(per, double(obs.bytes_left()) / files, rtt);
  known = true;
}

int LeftChannels::want(const Observation& obs, double rate_bps, double rtt, int total, int max_channels) {
  channel_bps = 0;
  const int files = files_left(obs);
  if (!known || files <= 0) return 0;
  channel_bps = open_channel_bps(double(obs.bytes_left()) / files, rtt, window_bytes);
  if (channel_bps <= 0) return 0;
  const int n = int(std::ceil(rate_bps * kMargin / channel_bps));
  return std::min({n, std::max(1, max_channels), total + files});
}

bool CapMargin::note(const Observation& obs, double floor_bps) {
  const double cap = obs.params.rate_cap_bps, thr = obs.throughput_bps;
  if (value < kMost && obs.flow && obs.flow->loss_events > 0) {
    value = kMost;
    return true;
  }
  if (obs.settling || value >= kMost || !cap_binds(cap, thr) || thr >= floor_bps) return false;
  value = std::min(kMost, value + kStep);
  return true;
}

double CapMargin::held(double need_bps, double floor_bps, double band_top) const {
  return std::max(need_bps * (1 + kLeast), std::min(need_bps * (1 + value), floor_bps * (1 + band_top)));
}

bool cap_binds(double cap_bps, double thr_bps) { return cap_bps > 0 && thr_bps >= 0.9 * cap_bps; }

bool cap_at(double cap_bps, double held_bps) { return cap_bps > 0 && std::abs(cap_bps - held_bps) <= 0.02 * held_bps; }

void set_cc(Params& p, const std::vector<int>& cc) {
  for (size_t i = 0; i < p.chunks.size() && i < cc.size(); ++i) p.chunks[i].cc = std::max(1, cc[i]);
}

}  // namespace xfer::tune
