// The daemon's metrics (metrics.h): counters fed by the jobs' intervals and
// ends, gauges read from the service at each scrape. The list, with what
// each means, is the declarations below (and README.md "Metrics").
#include <fmt/format.h>

#include <chrono>

#include "service.h"
#include "xfer/log.h"
#include "xfer/sysfs.h"

namespace xferd {

namespace log = xfer::log;
using Type = MetricSet::Type;

namespace {

// RTT: from a LAN's fraction of a millisecond to a satellite's second.
const std::vector<double> kRttBuckets = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5};
// A job's time from Submit to its end: seconds to a day.
const std::vector<double> kDurationBuckets = {1, 5, 15, 60, 300, 900, 3600, 4 * 3600, 12 * 3600, 86400};

MetricLabels by_job(const JobRecord& j) { return {{"policy", j.policy.name}, {"class", xfer::to_string(j.cls)}}; }
MetricLabels by_policy(const JobRecord& j) { return {{"policy", j.policy.name}}; }

double unix_now_s() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace


void Service::declare_counters() {
  MetricSet& c = counters;
  c.declare("xferd_received_bytes_total", Type::Counter,
            "Bytes of files received from the network (resumed bytes already on disk are not counted again).");
  c.declare("xferd_files_total", Type::Counter,
            "Files settled: done (in place: fetched, or found complete) or failed (given up on).");
  c.declare("xferd_jobs_finished_total", Type::Counter, "Jobs that ended, by their final state.");
  c.declare("xferd_job_duration_seconds", Type::Histogram, "Time from Submit to the end of jobs that ended done.",
            kDurationBuckets);
  c.declare("xferd_tcp_retransmit_signals_total", Type::Counter,
            "Loss signals on the jobs' TCP flows: retransmissions and out-of-order arrivals, the receiver's sight of "
            "loss (eBPF or TCP_INFO).");
  c.declare("xferd_tcp_rtt_seconds", Type::Histogram,
            "The jobs' TCP round-trip time, one observation per job and control interval (weighted by each flow's "
            "bytes).",
            kRttBuckets);
  c.declare("xferd_sla_intervals_total", Type::Counter,
            "Control intervals of jobs with a promise (a throughput floor or an energy ceiling) that kept it (met) or "
            "not (missed); intervals that began with new parameters or ended the job are not judged.");
  c.declare("xferd_kernel_changes_total", Type::Counter,
            "Changes of online cores or CPU frequency the jobs' tuners asked for.");
}

void Service::count(JobRecord& j) {
  if (!j.run) return;
  const xfer::JobProgress p = j.run->job().progress();
  MetricLabels labels = by_job(j);
  if (p.bytes_fetched > j.counted.fetched) {
    counters.add("xferd_received_bytes_total", labels, double(p.bytes_fetched - j.counted.fetched));
    j.counted.fetched = p.bytes_fetched;
  }
  // Files found complete at a resume count as done again in the new run:
  // the job's highest count is what is counted.
  if (p.files_done > j.counted.files_done) {
    counters.add("xferd_files_total", {{"policy", j.policy.name}, {"outcome", "done"}},
                 double(p.files_done - j.counted.files_done));
    j.counted.files_done = p.files_done;
  }
  if (p.files_failed > j.counted.files_failed) {
    counters.add("xferd_files_total", {{"policy", j.policy.name}, {"outcome", "failed"}},
                 double(p.files_failed - j.counted.files_failed));
    j.counted.files_failed = p.files_failed;
  }
  int changes = j.run->loop().kernel_changes();
  if (changes > j.counted.kernel_changes) {
    counters.add("xferd_kernel_changes_total", by_policy(j), changes - j.counted.kernel_changes);
    j.counted.kernel_changes = changes;
  }
}

void Service::count_interval(JobRecord& j, const xfer::IntervalRecord& r) {
  count(j);
  const xfer::Observation& o = r.obs;
  if (o.flow && o.flow->bytes > 0) {
    counters.add("xferd_tcp_retransmit_signals_total", by_policy(j), o.flow->retrans_per_mb * double(o.flow->bytes) / 1e6);
    if (o.flow->rtt_ms > 0) counters.observe("xferd_tcp_rtt_seconds", by_policy(j), o.flow->rtt_ms / 1e3);
  }
  SlaTally::Turn turn;
  std::optional<bool> kept = j.sla.judge(o, &turn);
  if (!kept) return;
  counters.add("xferd_sla_intervals_total", {{"policy", j.policy.name}, {"outcome", *kept ? "met" : "missed"}}, 1);
  // An operator is told when a promise is first missed, and when it holds
  // again: not at every interval.
  if (turn == SlaTally::Turn::FirstMiss)
    log::event(log::msg::kSlaMissed, spdlog::level::warn, "job {}: SLA missed: {}, this interval {:.1f} Mbit/s{}",
               j.row.id, j.sla.promise(), o.throughput_bps / 1e6,
               o.joules && o.bytes_interval ? fmt::format(", {:.1f} J/GB", *o.joules / (double(o.bytes_interval) / 1e9))
                                            : std::string());
  else if (turn == SlaTally::Turn::MetAgain)
    log::event(log::msg::kSlaMetAgain, spdlog::level::info, "job {}: SLA met again: {} ({} of {} intervals met)",
               j.row.id, j.sla.promise(), j.sla.met, j.sla.met + j.sla.missed);
}


std::string Service::report(const JobRecord& j) const {
  if (j.run) {
    nlohmann::json r = j.run->report();
    r["job"] = j.row.id;
    r["policy"] = j.policy.name;
    r["sla"] = j.sla.to_json();
    return r.dump();
  }
  std::string kept = j.summary;
  if (kept.empty() && j.finished()) kept = store->summary(j.row.id);
  return kept;
}

void add_sla(const JobRecord& j, nlohmann::json& summary) { summary["sla"] = j.sla.to_json(); }

int Service::online_cpus() const {
  xfer::SysFs cpu("/sys/devices/system/cpu");
  return int(xfer::parse_cpu_list(cpu.read("online").value_or("0")).size());
}

long Service::cpu_khz() const {
  xfer::SysFs cpu("/sys/devices/system/cpu");
  if (auto khz = cpu.read_int("cpu0/cpufreq/scaling_cur_freq")) return long(*khz);
  return node.kernel() ? node.kernel()->freq_khz() : 0;
}

std::string Service::scrape() {
  auto t0 = std::chrono::steady_clock::now();
  for (auto& [id, j] : jobs) count(*j);

  MetricSet g;
  g.declare("xferd_build_info", Type::Gauge, "xferd's version (the value is 1).");
  g.set("xferd_build_info", {{"version", XFERD_VERSION}}, 1);
  g.declare("xferd_jobs", Type::Gauge, "Jobs the daemon keeps, by policy and state.");
  for (const auto& [name, p] : cfg.policies)
    for (const char* st : {"queued", "discovering", "running", "paused", "needs-credentials"})
      g.set("xferd_jobs", {{"policy", name}, {"state", st}}, 0);
  g.declare("xferd_throughput_bytes_per_second", Type::Gauge,
            "What the running jobs moved over their last control interval, by policy and class.");
  g.declare("xferd_sla_met", Type::Gauge,
            "Running jobs with a promise whose last judged interval kept it (1) or not (0): their count by policy "
            "and outcome.");
  g.declare("xferd_arbiter_capacity_bytes_per_second", Type::Gauge,
            "The link's capacity the arbiter divides: configured (network.bandwidth_mbps) or measured; 0: not known "
            "yet.");
  g.declare("xferd_arbiter_capacity_measured", Type::Gauge, "1 when the capacity is measured, 0 when configured.");
  g.declare("xferd_arbiter_allotted_bytes_per_second", Type::Gauge,
            "The rate caps the arbiter allots the capped running jobs, summed by class.");
  g.declare("xferd_arbiter_capped_jobs", Type::Gauge, "Running jobs under an arbiter's cap, by class.");
  g.declare("xferd_arbiter_floors_bytes_per_second", Type::Gauge, "Throughput floors of the running jobs, summed.");
  double floors_bps = 0;
  for (const auto& [id, jp] : jobs) {
    const JobRecord& j = *jp;
    if (j.finished()) continue;
    MetricLabels st = {{"policy", j.policy.name}, {"state", xfer::to_string(j.state)}};
    g.set("xferd_jobs", st, g.value("xferd_jobs", st) + 1);
    if (!j.run) continue;
    MetricLabels l = by_job(j);
    g.set("xferd_throughput_bytes_per_second", l, g.value("xferd_throughput_bytes_per_second", l) + j.throughput_bps / 8);
    if (j.sla.last) {
      MetricLabels s = {{"policy", j.policy.name}, {"outcome", *j.sla.last ? "met" : "missed"}};
      g.set("xferd_sla_met", s, g.value("xferd_sla_met", s) + 1);
    }
    MetricLabels cls = {{"class", xfer::to_string(j.cls)}};
    double cap = j.run->loop().allotment().cap_bps;
    g.set("xferd_arbiter_allotted_bytes_per_second", cls,
          g.value("xferd_arbiter_allotted_bytes_per_second", cls) + cap / 8);
    g.set("xferd_arbiter_capped_jobs", cls, g.value("xferd_arbiter_capped_jobs", cls) + (cap > 0 ? 1 : 0));
    floors_bps += node.arbiter().floor_released(uint32_t(j.row.id)) ? 0 : j.sla.floor_bps;
  }
  g.set("xferd_arbiter_capacity_bytes_per_second", {}, node.arbiter().capacity_bps() / 8);
  g.set("xferd_arbiter_capacity_measured", {}, node.arbiter().capacity_measured() ? 1 : 0);
  g.set("xferd_arbiter_floors_bytes_per_second", {}, floors_bps / 8);

  g.declare("xferd_energy_joules_total", Type::Counter,
            "The machine's energy while xferd's jobs ran, measured (RAPL) or modelled as source says. Not per job: "
            "a job's energy is shown to its owner and root only.");
  if (node.machine().meter())
    g.set("xferd_energy_joules_total", {{"source", node.machine().meter()->source()}}, node.machine().joules_shared());
  g.declare("xferd_online_cpus", Type::Gauge, "CPUs online now.");
  g.set("xferd_online_cpus", {}, online_cpus());
  g.declare("xferd_cpu_frequency_hertz", Type::Gauge,
            "cpu0's frequency now (cpufreq), or the one the kernel layer set; absent without either.");
  if (long khz = cpu_khz(); khz > 0) g.set("xferd_cpu_frequency_hertz", {}, double(khz) * 1e3);
  g.declare("xferd_kernel_layer_jobs", Type::Gauge, "Running jobs that share the kernel layer (cores, frequency).");
  g.set("xferd_kernel_layer_jobs", {}, double(node.kernel_users()));
  g.declare("xferd_history_unshipped_rows", Type::Gauge,
            "History rows in the local journal not yet shipped to the fleet's PostgreSQL.");
  g.declare("xferd_history_shipping_failing", Type::Gauge, "1 while the history's server does not answer.");
  if (history) {
    g.set("xferd_history_unshipped_rows", {}, double(history->unshipped()));
    g.set("xferd_history_shipping_failing", {}, history->ship_error().empty() ? 0 : 1);
  }
  g.declare("xferd_parameter_table_age_seconds", Type::Gauge,
            "Age of the parameter table the hla policies start from ([hla] table); absent: none loaded.");
  if (hla_table) g.set("xferd_parameter_table_age_seconds", {}, std::max(0.0, unix_now_s() - hla_table->generated_unix));

  std::string out;
  out.reserve(16384);
  g.render(out);
  counters.render(out);
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  MetricSet cost;
  cost.declare("xferd_scrape_duration_seconds", Type::Gauge, "What building this page took.");
  cost.set("xferd_scrape_duration_seconds", {}, took);
  cost.render(out);
  return out;
}

}  // namespace xferd
