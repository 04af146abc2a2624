// The job's JSON report, built in one place from the Job's and the loop's
// typed data. Its names are the ones `xferctl run --json`, the daemon's
// stored summary and the README document.
#include "xfer/control_loop.h"
#include "xfer/kernel_knobs.h"
#include "xfer/text.h"

namespace xfer {

namespace {

using nlohmann::json;

json flow_json(const FlowInterval& f) {
  return {{"rtt_ms", f.rtt_ms}, {"delta_rtt_ms", f.delta_rtt_ms}, {"retransmits_per_mb", f.retrans_per_mb},
          {"flows", f.flows}};
}

json interval_json(const IntervalRecord& r) {
  const Observation& o = r.obs;
  json params = json::array();
  for (size_t i = 0; i < o.chunks.size(); ++i) {
    const ChunkObservation& c = o.chunks[i];
    json cj = {{"chunk", to_string(c.kind)},
               {"cc", c.params.cc},
               {"p", c.params.p},
               {"pp", c.params.pp},
               {"throughput_mbps", c.throughput_bps / 1e6}};
    if (c.flow) cj.update(flow_json(*c.flow));
    params.push_back(cj);
  }
  json e = {{"t", o.t_s},
            {"interval_s", o.interval_s},
            {"throughput_mbps", o.throughput_bps / 1e6},
            {"bytes_done", o.bytes_done},
            {"params", params},
            {"reason", o.params.reason}};
  if (o.joules) e["joules"] = *o.joules;
  if (o.dynamic_joules) e["dynamic_joules"] = *o.dynamic_joules;
  for (const KernelKnobDef& d : kernel_knobs())
    if (long v = d.observed(o); v > 0) e[d.column] = v;
  if (o.params.rate_cap_bps > 0) e["rate_cap_mbps"] = o.params.rate_cap_bps / 1e6;
  if (o.allotted_bps > 0) e["allotted_mbps"] = o.allotted_bps / 1e6;  // the arbiter's cap
  if (o.near_end) e["near_end"] = true;
  if (o.flow) {
    e["flow_throughput_mbps"] = o.flow->throughput_bps / 1e6;
    e.update(flow_json(*o.flow));
  }
  if (o.ext_load) e["ext_load"] = *o.ext_load;
  if (o.cpu_pct) e["cpu_pct"] = *o.cpu_pct;
  if (o.one_off_cpu_s > 0) e["one_off_cpu_s"] = o.one_off_cpu_s;
  if (r.decided) e["decision"] = r.decided->reason;
  return e;
}

}  // namespace

json job_report(const Job& job, const ControlLoop* loop) {
  JobProgress p = job.progress();
  json j;
  j["state"] = to_string(p.state);
  j["policy"] = loop ? loop->tuner().name() : "none";
  j["files"] = p.files_total;
  j["files_ok"] = p.files_done;
  j["files_skipped"] = p.files_skipped;
  j["files_failed"] = p.files_failed;
  j["bytes"] = p.bytes_total;
  j["bytes_fetched"] = p.bytes_fetched;
  j["bytes_resumed"] = p.bytes_resumed;
  j["body_reads"] = p.body_reads;
  j["cap_resumes"] = {{"all", p.cap_resumes}, {"cut", p.cap_resumes_cut}};
  j["source_restarts"] = p.source_restarts;
  j["files_no_validator"] = p.files_unvalidated;
  j["requests_reissued"] = p.requests_reissued;
  j["retried_fresh"] = {{"not_http", p.retried_not_http}, {"http2_framing", p.retried_http2_framing}};
  j["preconnected"] = {{"opened", p.preconnected}, {"used", p.preconnected_used}};
  j["seconds"] = p.seconds;
  j["throughput_mbps"] = p.seconds > 0 ? double(p.bytes_fetched) * 8 / p.seconds / 1e6 : 0.0;
  j["rtt_ms"] = job.info().rtt_s * 1e3;
  j["bdp_bytes"] = job.info().bdp_bytes;
  {
    // The link rate the BDP and the start estimates took, and where from.
    const StartFacts& info = job.info();
    const char* source = info.link_configured ? "configured" : info.link_from_path ? "path" : "assumed";
    json link = {{"mbps", info.bandwidth_bps / 1e6}, {"source", source}};
    if (info.link_from_path || (info.path_loss_pct >= 0 && job.options().loss_pct < 0))
      link["path"] = job.options().path_known;
    if (info.loss_pct >= 0)
      link["loss_pct"] = info.loss_pct, link["loss_source"] = job.options().loss_pct >= 0 ? "configured" : "path";
    j["link"] = link;
  }
  if (!job.fatal_error().empty()) j["error"] = job.fatal_error();
  j["failed"] = json::array();
  for (const auto& f : job.failed()) j["failed"].push_back({{"url", shown_url(f.url)}, {"reason", f.reason}});
  j["chunks"] = json::array();
  for (const ChunkStatus& c : job.chunks())
    j["chunks"].push_back({{"kind", to_string(c.kind)},
                           {"files", c.files_total},
                           {"bytes", c.bytes_total},
                           {"avg_size", c.avg_size},
                           {"cc", c.params.cc},
                           {"p", c.params.p},
                           {"pp", c.params.pp}});
  j["origins"] = json::array();
  for (const OriginStatus& o : job.origins()) {
    j["origins"].push_back({{"origin", o.origin}, {"protocol", o.protocol}});
    if (!o.tls.empty()) j["origins"].back()["tls"] = o.tls;
  }
  j["timeline"] = json::array();
  j["energy"] = {{"source", "none"}};
  j["kernel"] = {{"mode", "off"}};
  j["flow_source"] = "none";
  if (!loop) return j;

  for (const IntervalRecord& r : loop->timeline()) j["timeline"].push_back(interval_json(r));
  j["tuner"] = loop->tuner().summary();
  const LoopParts& parts = loop->parts();
  if (std::optional<double> joules = loop->joules()) {
    const EnergyMeter* m = parts.machine->meter();
    double dynamic = loop->joules(EnergyKind::Dynamic).value_or(0);
    auto per_gb = [&](double x) { return p.bytes_fetched ? x / (double(p.bytes_fetched) / 1e9) : 0.0; };
    std::optional<EnergyKind> min = loop->tuner().minimises();
    j["energy"] = {{"source", m->source()},
                   {"measured", m->measured()},
                   {"basis", m->basis()},
                   {"joules", *joules},
                   {"joules_per_gb", per_gb(*joules)},
                   {"dynamic_joules", dynamic},
                   {"dynamic_joules_per_gb", per_gb(dynamic)},
                   {"kinds", "joules: end-system (the draw of the machine over the time of the job: the idle "
                             "power of the online cores plus the dynamic part); dynamic_joules: above the idle draw"},
                   {"policy_minimises", min ? energy_kind_name(*min) : "none"},
                   {"share", parts.machine->share_basis()}};
  }
  if (KernelLayer* k = parts.kernel) {
    j["kernel"] = {{"mode", k->mode_name()}, {"changes", loop->kernel_changes()}};
    Params set = k->in_effect();
    for (const KernelKnobDef& d : kernel_knobs())
      if (long v = d.get(set); v > 0) j["kernel"][d.column] = v;
    if (!loop->kernel_error().empty()) j["kernel"]["error"] = loop->kernel_error();
  }
  if (FlowMonitor* f = parts.flows) {
    j["flow_source"] = f->source();
    if (std::string why = f->source_note(); !why.empty()) j["flow_source_note"] = why;
    j["flow_bytes"] = loop->flow_bytes();  // TCP payload the flows received: bytes_fetched plus HTTP headers
    FlowMonitor::Overhead o = f->overhead();
    j["flow_overhead"] = {{"bpf_run_ms", double(o.bpf_run_ns) / 1e6}, {"bpf_runs", o.bpf_runs},
                          {"reader_cpu_ms", double(o.reader_ns) / 1e6}};
    if (uint64_t load = f->load_ns(); load > 0) j["flow_overhead"]["load_cpu_ms"] = double(load) / 1e6;
  }
  return j;
}

}  // namespace xfer
