// HistoryRecorder: a job's intervals as history rows (history.h).
#include <cmath>

#include "xfer/clock.h"
#include "xfer/engine.h"
#include "xfer/history.h"
#include "xfer/hla.h"
#include "xfer/interval_record.h"
#include "xfer/log.h"
#include "xfer/text.h"

namespace xfer::hla {

HistoryRecorder::HistoryRecorder(History& h, RunRow run, const Job& job) : h_(h), job_(job), run_(std::move(run)) {
  if (run_.node.empty()) run_.node = node_name();
  if (run_.dest_host.empty()) run_.dest_host = run_.node;
  if (run_.started_unix == 0) run_.started_unix = unix_now();
  if (run_.run.empty()) run_.run = run_key(run_.tool, run_.job_id, run_.started_unix);
  link_given_ = run_.link_source;
  loss_given_ = run_.loss_pct.has_value();
}

void HistoryRecorder::measured_path() {
  const StartFacts& info = job_.info();
  std::string link = link_given_;
  if (!info.link_configured && link_seen_bps_ > 0) run_.link_mbps = link_seen_bps_ / 1e6, link = "measured";
  if (loss_given_) link += ", loss configured";
  else if (loss_.pct() >= 0) run_.loss_pct = loss_.pct(), link += ", loss measured";
  run_.link_source = link;
}

void HistoryRecorder::begin() {
  const StartFacts& info = job_.info();
  run_.link_mbps = info.bandwidth_bps / 1e6;
  run_.handshake_rtt_ms = info.rtt_s * 1000;
  run_.cores_present = info.kernel.cores_present;
  run_.freq_levels = int64_t(info.kernel.freqs_khz.size());
  std::vector<OriginStatus> origins = job_.origins();
  if (!origins.empty()) run_.source_origin = origins.front().origin;
  // The job's file sizes pooled from its chunks: n, mean and sd of each.
  double n = 0, sum = 0, sq = 0;
  for (const ChunkStatus& c : job_.chunks()) {
    double k = double(c.files_total);
    n += k;
    sum += k * c.avg_size;
    sq += k * (c.size_sd * c.size_sd + c.avg_size * c.avg_size);
  }
  run_.files = int64_t(n);
  run_.bytes = int64_t(sum + 0.5);
  run_.size_mean = n > 0 ? sum / n : 0;
  run_.size_sd = n > 0 ? std::sqrt(std::max(0.0, sq / n - run_.size_mean * run_.size_mean)) : 0;
  begun_ = true;
  put_run();
}

void HistoryRecorder::put_run() {
  try {
    h_.put_run(run_);
  } catch (const std::exception& e) {
    if (last_error_ != e.what()) log::error("history: {}", printable(e.what()));
    last_error_ = e.what();
  }
}

void HistoryRecorder::interval(const IntervalRecord& rec) {
  if (!begun_) begin();
  const Observation& o = rec.obs;
  const std::vector<ChunkStatus>& status = rec.chunks;
  // The job's energy is split among its chunks by what each one's bytes
  // and connections cost (EnergySplit, fitted over the run so far).
  std::vector<double> bytes(o.chunks.size()), conn_s(o.chunks.size());
  for (size_t i = 0; i < o.chunks.size(); ++i) {
    const ChunkObservation& c = o.chunks[i];
    bytes[i] = c.throughput_bps * o.interval_s / 8;
    double conns = c.flow && c.flow->flows > 0 ? double(c.flow->flows) : c.finished ? 0 : double(c.params.cc * c.params.p);
    conn_s[i] = conns * o.interval_s;
  }
  // An interval that held a one-off of the measuring (the flow monitor's
  // load, about 60 ms of CPU 2 s into an xferctl job) is no setting's
  // energy: not fitted, and its rows say so (kOneOffTag). In the bench's
  // collected history the look that ended 2.3-2.8 s in read a median 1.38x the
  // J/GB of the two looks either side (12 runs of hla-goals-b9d4751's history).
  const bool one_off = o.one_off_cpu_s > 0;
  if (std::optional<double> j = o.dynamic_joules ? o.dynamic_joules : o.joules; j && !o.settling && !one_off)
    split_.add(*j, bytes, conn_s);
  std::vector<double> shares = split_.shares(bytes, conn_s);
  std::vector<IntervalRow> rows;
  double now = unix_now();
  for (size_t i = 0; i < o.chunks.size(); ++i) {
    const ChunkObservation& c = o.chunks[i];
    if (c.finished && bytes[i] < 1) continue;  // done before this interval: nothing of it to learn
    IntervalRow r;
    r.node = run_.node, r.run = run_.run, r.seq = seq_, r.chunk = int64_t(i);
    r.t_unix = now, r.t_s = o.t_s, r.interval_s = o.interval_s, r.settling = o.settling;
    r.chunk_kind = to_string(c.kind);
    r.throughput_bps = c.throughput_bps, r.job_throughput_bps = o.throughput_bps;
    r.bytes_interval = int64_t(bytes[i] + 0.5);
    double share = shares[i];
    if (o.joules) r.joules = *o.joules * share, r.job_joules = o.joules, r.energy_source = o.energy_source;
    if (o.dynamic_joules) r.dynamic_joules = *o.dynamic_joules * share;
    if (c.flow) {
      r.rtt_ms = c.flow->rtt_ms, r.delta_rtt_ms = c.flow->delta_rtt_ms, r.retrans_per_mb = c.flow->retrans_per_mb;
      r.flows = c.flow->flows;
    }
    r.ext_load = o.ext_load, r.cpu_pct = o.cpu_pct;
    if (o.cores) r.cores = *o.cores;
    if (o.freq_khz) r.freq_khz = *o.freq_khz;
    r.cc = c.params.cc, r.p = c.params.p, r.pp = c.params.pp;
    if (i < status.size()) {
      r.chunk_files = int64_t(status[i].files_total), r.chunk_bytes = int64_t(status[i].bytes_total);
      r.chunk_size_mean = status[i].avg_size, r.chunk_size_sd = status[i].size_sd;
    }
    r.reason = o.params.reason;
    if (one_off) r.reason += kOneOffTag;
    rows.push_back(std::move(r));
  }
  if (o.link_bps) link_seen_bps_ = std::max(link_seen_bps_, *o.link_bps);
  if (o.flow) loss_.add(*o.flow);
  ++seq_;
  try {
    h_.append(rows);
    rows_ += rows.size();
  } catch (const std::exception& e) {
    if (last_error_ != e.what()) log::error("history: {}; this interval is not recorded", printable(e.what()));
    last_error_ = e.what();
  }
}

void HistoryRecorder::finish(const std::string& outcome) {
  run_.outcome = outcome;
  run_.finished_unix = unix_now();
  if (!begun_) begin();  // a job too short for an interval (or one that failed early) still has its run
  measured_path();
  put_run();
}

}  // namespace xfer::hla
