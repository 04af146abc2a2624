// What the tuner tests share: job shapes and a simulated engine whose
// throughput and power follow curves a test defines.
#pragma once

#include <cmath>
#include <functional>
#include <optional>
#include <vector>

#include "xfer/tuner.h"

namespace xfer::testing {

inline ChunkPlan plan(ChunkKind k, size_t files, uint64_t bytes) {
  ChunkPlan p;
  p.kind = k;
  for (size_t i = 0; i < files; ++i) p.files.push_back(i);
  p.bytes = bytes;
  return p;
}

inline StartFacts wan_info(std::vector<ChunkPlan> chunks, int max_channels = 16) {
  StartFacts info;
  info.chunks = std::move(chunks);
  info.bdp_bytes = 2'500'000;  // 500 Mbit/s x 40 ms
  info.tcp_buf_bytes = 6'000'000;
  info.max_channels = max_channels;
  return info;
}

// A transfer whose throughput and power are functions of the params: every
// interval of `dt` seconds it moves mbps(p) and spends watts(p).
struct SimEngine {
  std::function<double(const Params&)> mbps;
  std::function<double(const Params&)> watts;
  std::function<double(const Params&)> cpu_pct;  // the online cores' utilisation (null: not reported)
  bool honours_cap = true;  // a receive-rate cap holds the throughput to it
  double idle_watts = 0;    // > 0: joules are the end system's (watts + idle), dynamic_joules the load's
  double dt = 1;
  uint64_t total = 100'000'000'000;  // never near its end unless a test says so
  uint64_t done = 0;
  double t_s = 0;  // the job's time at the end of the last step
  std::vector<Params> applied;
  std::optional<Params> prev;  // the params of the interval before

  Observation step(const Params& p, size_t nchunks, std::vector<bool> finished = {}) {
    double m = mbps(p);
    if (p.rate_cap_bps > 0 && honours_cap) m = std::min(m, p.rate_cap_bps / 1e6);
    Observation o;
    o.interval_s = dt;
    o.t_s = (t_s += dt);
    o.bytes_interval = uint64_t(m * 1e6 / 8 * dt);
    o.throughput_bps = m * 1e6;
    done += o.bytes_interval;
    o.bytes_done = done, o.bytes_total = total;
    o.joules = (watts(p) + idle_watts) * dt;
    if (idle_watts > 0) o.dynamic_joules = watts(p) * dt;
    if (cpu_pct) o.cpu_pct = cpu_pct(p);
    o.energy_source = "sim";
    o.settling = !prev || prev->chunks != p.chunks;  // as the control loop marks it
    prev = p;
    for (size_t i = 0; i < nchunks; ++i) {
      ChunkObservation c;
      c.params = p.chunks[i];
      c.finished = i < finished.size() && finished[i];
      o.chunks.push_back(c);
    }
    return o;
  }
  // Runs the tuner for n intervals; returns the params in force at the end.
  Params run(Tuner& t, const StartFacts& info, int n) {
    Params p = t.init(info);
    applied.push_back(p);
    for (int i = 0; i < n; ++i) {
      if (auto next = t.decide(step(p, info.chunks.size()))) p = *next;
      applied.push_back(p);
    }
    return p;
  }
};

}  // namespace xfer::testing
