// xfer-bench: xferctl against curl, wget and aria2c on an emulated link, in
// one run, with the same data, the same server and the same energy model.
//
//   xfer-bench SCENARIO.toml --out DIR [--quick] [--repeat N]
//
// For each dataset of the scenario and each repeat, every client fetches the
// dataset from nginx in the link's server namespace into an empty directory
// in the client namespace (clients interleaved, so drift hits all alike).
// Each run: wall time, verified bytes (sha256 of every file), client CPU
// (user+sys of its process tree), server CPU (nginx), modelled energy.
// Output: DIR/results.csv (appended run by run), DIR/summary.md (medians,
// ratios to the best peer, the commit measured), DIR/plot-DATASET.svg.
// Full runs are kept in bench/results/<scenario>-<commit> (its README).
//
// A scenario with [hla] (issue 15) first makes a history and a parameter
// table: xfer-hla collect on the plan (its own datasets, of the same shapes
// as the measured ones but other seeds) and xfer-hla analyze, in
// --hla-dir (default DIR/hla; the history is the progress, so a second run
// or another scenario with the same directory reuses it). Clients' "{hla_table}"
// arguments name the table. The report then adds the best static, the
// convergence, the SLA adherence per interval and DIR/timeline-DATASET.svg.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <fstream>
#include <algorithm>
#include <nlohmann/json.hpp>

#include "contention.h"
#include "cross.h"
#include "hla_report.h"
#include "learning.h"
#include "measure.h"
#include "report.h"
#include "scenario.h"
#include "testbed.h"
#include "xfer/proc_stat.h"
#include "xfer/datagen.h"
#include "xfer/energy.h"

namespace fs = std::filesystem;

using namespace bench;

namespace {

volatile std::sig_atomic_t g_stop = 0;
void on_signal(int) { g_stop = 1; }

// The command line of one client, its input files written under inputs/.
std::vector<std::string> client_argv(const bench::ClientSpec& c, const PreparedDataset& d, const std::string& base_url,
                                     const std::string& inputs, const std::string& dest, double rate_mbps,
                                     const std::string& ca_file) {
  std::string urls = inputs + "/urls.txt", cfg = inputs + "/curl.cfg", manifest = inputs + "/manifest.txt";
  {
    std::ofstream u(urls), k(cfg), m(manifest);
    for (const auto& f : d.files) {
      std::string url = base_url + d.id + "/" + f.name;
      u << url << "\n";
      k << "url = \"" << url << "\"\noutput = \"" << dest << "/" << f.name << "\"\n";
      m << url << " " << f.size << "\n";  // the listing a user has; sha256 is checked by the bench
    }
  }
  // curl over TLS asks for h2 by ALPN (its --parallel multiplexes there);
  // in clear text h2 needs prior knowledge, which curl --parallel cannot use
  // here (7.88: "HTTP2 framing layer"), so h1 unless the client is on h2c.
  bool tls = c.port == "https";
  std::string proto = tls ? "--http2" : c.port == "h2c" ? "--http2-prior-knowledge" : "--http1.1";
  std::vector<std::string> a;
  if (c.kind == "xferctl") {
    a = {c.program.empty() ? self_dir() + "/xferctl" : c.program, "run", "--manifest", manifest, "--dest", dest, "--json", "--no-progress",
         "--bandwidth-mbps", fmt::format("{}", rate_mbps)};
    if (tls) a.insert(a.end(), {"--ca-file", ca_file});
  } else if (c.kind == "curl-seq") {
    a = {"curl", "-s", "-S", "--fail", proto, "-K", cfg};
    if (tls) a.insert(a.end(), {"--cacert", ca_file});
  } else if (c.kind == "curl-parallel") {
    a = {"curl", "-s", "-S", "--fail", proto, "-Z", "--parallel-max", std::to_string(c.parallel), "-K", cfg};
    if (tls) a.insert(a.end(), {"--cacert", ca_file});
  } else if (c.kind == "wget") {
    a = {"wget", "-nv", "-i", urls, "-P", dest};
    if (tls) a.push_back("--ca-certificate=" + ca_file);
  } else if (c.kind == "aria2c") {
    a = {"aria2c", "-i", urls, "-d", dest, "-j", std::to_string(c.parallel), "-x", std::to_string(c.split), "-s",
         std::to_string(c.split), "--min-split-size=1M", "--file-allocation=none", "--auto-file-renaming=false",
         "--allow-overwrite=true", "--summary-interval=0", "--console-log-level=error", "--max-tries=5"};
    if (tls) a.push_back("--ca-certificate=" + ca_file);
  }
  a.insert(a.end(), c.args.begin(), c.args.end());
  return a;
}

// Reads every file of a dataset (into the page cache, where nginx will
// find them); a file that cannot be read is left to the run to report.
void warm_page_cache(const std::string& dir, const std::vector<bench::ExpectedFile>& files) {
  std::vector<char> buf(1 << 20);
  for (const auto& f : files) {
    int fd = ::open((dir + "/" + f.name).c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    while (::read(fd, buf.data(), buf.size()) > 0) {
    }
    ::close(fd);
  }
}

// What xferctl --json said of its tuning (its stdout, kept in the run's log).
void read_tuning(const std::string& path, bench::RunRow* r) {
  std::ifstream f(path);
  auto j = nlohmann::json::parse(f, nullptr, false);
  if (j.is_discarded() || !j.contains("tuner")) return;
  const auto& t = j["tuner"];
  auto number = [&](const char* key, double* to) {
    if (t.contains(key) && t[key].is_number()) *to = t[key].get<double>();
  };
  if (t.contains("chosen") && t["chosen"].is_number() && t["chosen"].get<double>() > 0) r->chosen = t["chosen"];
  number("target_mbps", &r->target_mbps);
  number("controlled_mean_mbps", &r->controlled_mbps);
  number("floor_mbps", &r->floor_mbps);
  number("ceiling_j_per_gb", &r->budget_j_per_gb);
  if (!(r->floor_mbps > 0)) r->floor_mbps = NAN;  // 0: none (most throughput)
  if (!(r->budget_j_per_gb > 0)) r->budget_j_per_gb = NAN;  // 0: none (least energy)
  if (j.contains("seconds") && j["seconds"].is_number()) r->clock_offset_s = std::max(0.0, r->wall_s - j["seconds"].get<double>());
  std::vector<double> v;
  const auto& tl = j["timeline"];
  uint64_t before = 0;
  for (size_t i = 0; i < tl.size(); ++i) {
    bench::IntervalPoint p;
    p.t_s = tl[i].value("t", 0.0), p.mbps = tl[i].value("throughput_mbps", 0.0);
    uint64_t done = tl[i].value("bytes_done", uint64_t(0));
    if (tl[i].contains("joules") && done > before) p.j_per_gb = tl[i]["joules"].get<double>() / (double(done - before) / 1e9);
    if (tl[i].contains("dynamic_joules") && done > before)
      p.dynamic_j_per_gb = tl[i]["dynamic_joules"].get<double>() / (double(done - before) / 1e9);
    if (tl[i].contains("ext_load")) p.ext_load = tl[i]["ext_load"].get<double>();
    before = done;
    r->timeline.push_back(p);
    if (i >= 1 && i + 1 < tl.size()) v.push_back(p.mbps);
  }
  if (!v.empty()) r->steady_mbps = bench::median(v);
}

// Runs argv with this terminal (progress shows); its exit status.
int run_visible(const std::vector<std::string>& argv) {
  pid_t pid = fork();
  if (pid == 0) bench::exec_argv(argv);
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

// The [hla] phase: collect (resumed from the history if it has begun),
// analyze; the table's path. Throws with what failed.
std::string hla_phase(const bench::Scenario& sc, bool quick, const std::string& dir) {
  fs::create_directories(dir);
  std::string history = dir + "/history.db", table = dir + "/table.json";
  fmt::print(stderr, "xfer-bench: [hla] collecting the history ({}) into {}\n", sc.hla.plan, history);
  std::vector<std::string> collect = {self_dir() + "/xfer-hla", "collect", sc.hla.plan, "--history", history,
                                      "--out", dir + "/collect"};
  if (quick) collect.push_back("--quick");
  if (int rc = run_visible(collect); rc != 0)
    throw std::runtime_error(fmt::format("xfer-hla collect failed (exit {}); its logs are in {}/collect/logs", rc, dir));
  fmt::print(stderr, "xfer-bench: [hla] analysing it into {}\n", table);
  bench::Exec e = bench::run_measured({self_dir() + "/xfer-hla", "analyze", "--history", history, "--out", table,
                                       "--plots", dir + "/plots"},
                                      dir + "/analyze", 600);
  if (e.exit_code != 0)
    throw std::runtime_error(fmt::format("xfer-hla analyze failed (exit {}); see {}/analyze.err", e.exit_code, dir));
  return table;
}

}  // namespace

// CPU seconds every core of the machine has spent busy (/proc/stat, less
// idle and iowait), at the kernel's 10-ms tick.
// The commit of the source tree this xfer-bench was built from, "-dirty"
// when it had local changes: a result is keyed by what it measured.
static std::string source_commit() {
  std::string dir = bench::source_dir();
  if (dir.find('\'') != std::string::npos) return "unknown (source path not quotable)";
  std::string out = bench::capture_line("git -C '" + dir + "' describe --always --dirty --abbrev=7 2>/dev/null");
  return out.empty() ? "unknown (not a git checkout)" : out;
}

static double machine_busy_s() { return double(xfer::read_cpu_times().busy) / double(sysconf(_SC_CLK_TCK)); }

int main(int argc, char** argv) {
  CLI::App app{"xfer-bench: xferctl against curl, wget and aria2c on an emulated link"};
  std::string scenario_path, out, data_root, hla_dir;
  std::vector<std::string> only_datasets;
  std::string dest_fs_kind = bench::DestFs::kImage;
  std::vector<std::string> only_clients;
  bool quick = false, profile = false;
  int repeat = 0, index = 0;
  app.add_option("scenario", scenario_path, "scenario file (TOML), e.g. tests/bench/wan.toml")->required();
  app.add_option("--out", out, "output directory")->required();
  app.add_flag("--quick", quick, "shrink the datasets (quick_scale) and default to one repeat");
  app.add_option("--repeat", repeat, "runs per client and dataset (default 3, 1 with --quick)")->check(CLI::Range(1, 50));
  app.add_option("--data", data_root, "where datasets are generated and kept (default OUT/data)");
  app.add_option("--dataset", only_datasets, "only the datasets of this shape (repeat for several)");
  app.add_option("--client", only_clients, "only clients whose name contains this (repeat for several)");
  app.add_option("--index", index, "link subnet index (default: a free one in 100-229, from the pid)")->check(CLI::Range(1, 250));
  app.add_option("--dest-fs", dest_fs_kind,
                 "where clients write: ext4-image (default: a journaled ext4 the bench makes and mounts) or out-dir")
      ->check(CLI::IsMember({bench::DestFs::kImage, bench::DestFs::kOutDir}));
  app.add_flag("--profile", profile,
               "run every client under perf record (cpu-clock, DWARF call graphs) into OUT/logs/*.perf.data; "
               "its CPU figures then include perf's own");
  app.add_option("--hla-dir", hla_dir, "where the [hla] phase keeps its history and table (default OUT/hla)");
  CLI11_PARSE(app, argc, argv);
  if (profile && std::system("command -v perf >/dev/null 2>&1") != 0) {
    fmt::print(stderr, "xfer-bench: --profile needs perf (Debian package linux-perf), which is not installed\n");
    return 2;
  }
  if (repeat == 0) repeat = quick ? 1 : 3;
  if (index == 0) {
    // 100-229 from the pid (the tests name theirs, 231-249), skipping one
    // whose namespaces exist: another bench's, or a killed one's leftovers.
    auto taken = [](int i) {
      std::string ns = "/run/netns/xfer-bench" + std::to_string(i);
      return access((ns + "-c").c_str(), F_OK) == 0 || access((ns + "-s").c_str(), F_OK) == 0;
    };
    int start = int(getpid() % 130);
    for (int k = 0; k < 130; ++k)
      if (!taken(index = 100 + (start + k) % 130)) break;
  }

  bench::Scenario sc;
  try {
    sc = bench::load_scenario(scenario_path);
  } catch (const std::exception& e) {
    fmt::print(stderr, "xfer-bench: {}\n", e.what());
    return 2;
  }
  fs::create_directories(out + "/logs");
  out = fs::canonical(out).string();
  if (data_root.empty()) data_root = out + "/data";
  fs::create_directories(data_root);
  data_root = fs::canonical(data_root).string();

  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);

  std::vector<PreparedDataset> datasets;
  try {
    for (const auto& d : sc.datasets)
      if (only_datasets.empty() || std::find(only_datasets.begin(), only_datasets.end(), d.shape) != only_datasets.end()) {
        datasets.push_back(prepare(d, quick, data_root));
        for (size_t i = 0; i + 1 < datasets.size(); ++i)
          if (datasets[i].id == datasets.back().id)  // their results would be one dataset's
            throw std::runtime_error("two datasets are both " + datasets.back().id +
                                     (quick ? " (with --quick: give them different quick_scale or quick_size_scale)"
                                            : ""));
      }
  } catch (const std::exception& e) {
    fmt::print(stderr, "xfer-bench: dataset: {}\n", e.what());
    return 1;
  }
  std::vector<bench::ClientSpec> clients;
  for (const auto& c : sc.clients)
    if (only_clients.empty() || std::any_of(only_clients.begin(), only_clients.end(),
                                            [&](const std::string& w) { return c.name.find(w) != std::string::npos; }))
      clients.push_back(c);
  std::string hla_table;
  for (const auto& c : clients)
    for (const auto& a : c.args)
      if (a.find("{hla_table}") != std::string::npos && sc.hla.plan.empty() && sc.learning.rounds == 0) {
        fmt::print(stderr, "xfer-bench: client '{}' names {{hla_table}} but the scenario has no [hla] phase\n", c.name);
        return 2;
      }
  if (!sc.hla.plan.empty()) {
    try {
      hla_table = hla_phase(sc, quick, hla_dir.empty() ? out + "/hla" : hla_dir);
    } catch (const std::exception& e) {
      fmt::print(stderr, "xfer-bench: {}\n", e.what());
      return g_stop ? 130 : 1;
    }
    for (auto& c : clients)
      for (auto& a : c.args)
        for (size_t at; (at = a.find("{hla_table}")) != std::string::npos;) a.replace(at, 11, hla_table);
  }

  std::string link_name = "bench" + std::to_string(index);
  std::unique_ptr<LinkProcess> link;
  std::unique_ptr<NginxInNs> server;
  BenchTls tls;
  try {
    link = std::make_unique<LinkProcess>(sc.link, link_name, index, out + "/logs/linkemu.err");
    bool https = std::any_of(clients.begin(), clients.end(), [](const auto& c) { return c.port == "https"; });
    if (https) tls = make_bench_tls(out + "/tls", link->server_ip);
    server = std::make_unique<NginxInNs>(*link, out + "/nginx", data_root, https ? &tls.site : nullptr);
  } catch (const std::exception& e) {
    fmt::print(stderr, "xfer-bench: {}\n", e.what());
    return 1;
  }
  if (!sc.jobs.empty()) {  // a contention scenario: its jobs together (contention.h)
    if (datasets.size() != sc.datasets.size()) {
      fmt::print(stderr, "xfer-bench: a scenario with [[job]]s runs all its datasets (no --dataset)\n");
      return 2;
    }
    uint64_t all = 0;  // every job writes its dataset (jobs may share one)
    for (const auto& j : sc.jobs) all += datasets[j.dataset].bytes;
    for (const auto& d : datasets) warm_page_cache(data_root + "/" + d.id, d.files);
    try {
      DestFs fs_for_jobs(dest_fs_kind, out, all);
      fmt::print(stderr, "xfer-bench: {}\n", fs_for_jobs.describe);
      return bench::run_contention(sc, datasets, *link, out, fs_for_jobs.root, repeat, source_commit(), &g_stop);
    } catch (const std::exception& e) {
      fmt::print(stderr, "xfer-bench: {}\n", e.what());
      return 1;
    }
  }
  std::unique_ptr<DestFs> dest_fs;
  try {
    uint64_t most = 0;
    for (const auto& d : datasets) most = std::max(most, d.bytes);
    dest_fs = std::make_unique<DestFs>(dest_fs_kind, out, most);
  } catch (const std::exception& e) {
    fmt::print(stderr, "xfer-bench: {}\n", e.what());
    return 1;
  }
  fmt::print(stderr, "xfer-bench: {}\n", dest_fs->describe);
  pid_t nginx = server->master();
  const int cores = int(sysconf(_SC_NPROCESSORS_ONLN));
  // The paper's coefficients as built in, the same for every client (a
  // calibrated file would describe another machine than the papers').
  const xfer::PowerCoefficients model;
  std::vector<linkemu::CrossSpec> cross;
  for (const auto& c : sc.cross) cross.push_back({c.start_s, c.stop_s, c.pct});
  linkemu::CrossTraffic traffic(link->client_ns, link->server_ns, link->server_ip, sc.link.rate_mbps, cross);

  std::string csv = out + "/results.csv";
  bool fresh = !fs::exists(csv);
  std::ofstream csv_out(csv, std::ios::app);
  if (fresh) csv_out << bench::csv_header() << "\n";
  std::vector<bench::RunRow> rows;
  int total = int(datasets.size() * clients.size()) * repeat, done = 0;
  fmt::print(stderr, "xfer-bench: {} on {} Mbit/s, {} ms RTT, {}% loss: {} runs\n", sc.name, sc.link.rate_mbps,
             sc.link.rtt_ms, sc.link.loss_pct, total);
  // One client's run on one dataset: measured, verified, logged, appended
  // to results.csv; tag tells runs of the same repeat apart in the logs.
  auto run_one = [&](const bench::ClientSpec& c, size_t ci, const PreparedDataset& d, int rep,
                     const std::string& tag) -> bench::RunRow {
    std::string work = out + "/work/" + d.id + "/" + std::to_string(ci);
    std::string dest = dest_fs->root + "/" + d.id + "-" + std::to_string(ci);
    fs::create_directories(work);  // the client's inputs (URL list, manifest, curl config)
    fs::remove_all(dest);
    fs::create_directories(dest);
    // No run pays for another's writeback: the peers leave their files
    // dirty in the page cache, where the next run's writeback (xferctl's
    // commits sync, and an ext4 journal commit may carry other files'
    // data) could meet them. Written out here, before the clock starts.
    ::sync();
    std::string base = c.port == "https" ? fmt::format("https://{}:{}/", link->server_ip, NginxInNs::kHttpsPort)
                       : "http://" + link->server_ip + (c.port == "h2c" ? ":8081/" : ":8080/");
    auto argv_c = client_argv(c, d, base, work, dest, sc.link.rate_mbps, tls.ca_file);
    std::string log = fmt::format("{}/logs/{}-{}-r{}{}", out, d.id, ci, rep, tag);
    std::vector<std::string> full = {"ip", "netns", "exec", link->client_ns};
    if (profile)  // software clock: this machine has no hardware counters
      full.insert(full.end(), {"perf", "record", "-q", "-e", "cpu-clock", "-F", "999", "--call-graph", "dwarf,16384",
                               "-o", log + ".perf.data", "--"});
    full.insert(full.end(), argv_c.begin(), argv_c.end());
    double srv0 = bench::process_tree_cpu_s(nginx);
    auto kthreads0 = bench::kernel_threads_cpu();
    traffic.start();
    bench::Exec e = bench::run_measured(full, log, 1800, [&] { traffic.poll(); });
    auto synced_from = std::chrono::steady_clock::now();
    double busy0 = machine_busy_s();
    ::sync();
    double writeback_cpu_s = machine_busy_s() - busy0;
    double kthread_cpu_s = bench::kernel_threads_cpu_since(kthreads0);
    double sync_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - synced_from).count();
    traffic.stop();
    double srv1 = bench::process_tree_cpu_s(nginx);
    if (!e.cores_restored.empty())
      fmt::print(stderr, "xfer-bench: {} #{} left cpu {} offline; brought back online for the next run\n", c.name,
                 rep, fmt::join(e.cores_restored, ","));

    bench::RunRow r;
    r.scenario = sc.name, r.dataset = d.id, r.client = c.name, r.kind = c.kind, r.repeat = rep;
    r.exit_code = e.exit_code, r.wall_s = e.wall_s, r.files = d.files.size();
    r.disk_s = e.wall_s + sync_s;
    r.writeback_cpu_s = writeback_cpu_s;
    r.kthread_cpu_s = kthread_cpu_s;
    r.files_ok = bench::verify_files(dest, d.files, &r.bytes);
    r.verified = r.files_ok == r.files;
    r.throughput_mbps = double(r.bytes) * 8 / e.wall_s / 1e6;
    r.client_cpu_s = e.cpu_s, r.server_cpu_s = srv1 - srv0;
    r.client_j = model.cpu_energy_j(r.client_cpu_s, r.wall_s, cores);
    r.server_j = model.cpu_energy_j(r.server_cpu_s, r.wall_s, cores);
    r.j_per_gb = r.bytes ? r.client_j / (double(r.bytes) / 1e9) : 0;
    r.core_s = e.core_s;
    r.end_j = r.client_j + model.idle_energy_j(e.core_s, r.wall_s);
    r.end_j_per_gb = r.bytes ? r.end_j / (double(r.bytes) / 1e9) : 0;
    r.energy_source = bench::kEnergySource;
    r.goal = c.goal;
    if (c.kind == "xferctl") read_tuning(log + ".out", &r);
    csv_out << bench::csv_line(r) << "\n" << std::flush;
    fmt::print(stderr, "[{}/{}] {} {} #{}{}: {:.1f} Mbit/s, {:.2f} s, CPU {:.2f} s, J/GB (model) {:.1f} dynamic, {:.1f} "
               "end-system, {}\n", ++done, total, d.id, c.name, rep, tag, r.throughput_mbps, r.wall_s, r.client_cpu_s,
               r.j_per_gb, r.end_j_per_gb,
               r.verified ? "verified" : fmt::format("NOT VERIFIED: {}/{} files, exit {}", r.files_ok, r.files, r.exit_code));
    fs::remove_all(dest);
    return r;
  };
  std::string learning_md;
  if (sc.learning.rounds > 0) {
    bench::LearningRun lr{sc, datasets, clients, out, repeat, &g_stop};
    lr.analyze_bin = self_dir() + "/xfer-hla";
    for (const auto& d : datasets) warm_page_cache(data_root + "/" + d.id, d.files);
    lr.run = [&](const bench::ClientSpec& c, size_t ci, const PreparedDataset& d, int curve, int round) {
      bench::RunRow r = run_one(c, ci, d, curve, fmt::format("-k{}", round));
      r.round = round;
      rows.push_back(r);
      return r;
    };
    total = bench::learning_runs(lr);
    bench::run_learning(lr);
    learning_md = bench::learning_markdown(lr, rows);
  } else {
    for (const auto& d : datasets) {
      // The server's files read once before the first run, so that the client
      // that runs first does not also pay for nginx reading them from disk.
      // (The engine's first run in an invocation stayed 0.10-0.15 s slower on
      // wan html with this in place: that has another cause, not yet found.)
      warm_page_cache(data_root + "/" + d.id, d.files);
      for (int rep = 1; rep <= repeat && !g_stop; ++rep)
        for (size_t ci = 0; ci < clients.size() && !g_stop; ++ci) rows.push_back(run_one(clients[ci], ci, d, rep, ""));
    }
  }
  server.reset();
  std::string counters = link->stop();
  std::ofstream(out + "/logs/linkemu.json") << counters << "\n";

  // A learning scenario's runs alternate between the datasets: the summary
  // keeps each dataset's together.
  std::stable_sort(rows.begin(), rows.end(), [&](const bench::RunRow& a, const bench::RunRow& b) {
    auto at = [&](const std::string& id) {
      for (size_t i = 0; i < datasets.size(); ++i)
        if (datasets[i].id == id) return i;
      return datasets.size();
    };
    return at(a.dataset) < at(b.dataset);
  });
  auto summary = bench::summarize(rows);
  std::string md = bench::markdown(sc.name + (quick ? " (quick)" : ""), summary,
                                   std::string(bench::kEnergySource) + "; idle " + model.idle_basis(),
                                   dest_fs->describe + (profile ? "; every client ran under perf record (--profile): "
                                                                  "its CPU figures include perf's own" : ""),
                                   source_commit());
  bool any_goal = false;
  for (const auto& c : clients) any_goal |= !c.goal.empty();
  bool hla_goal = false;
  for (const auto& c : clients) hla_goal |= c.goal == "static" || c.goal.rfind("hla-", 0) == 0;
  if (any_goal && !hla_goal) md += bench::goals_markdown(rows, sc.link.rate_mbps);
  bench::HlaContext hctx;
  for (const auto& c : sc.cross)
    for (double t : {c.start_s, c.stop_s})
      if (t > 0 && std::find(hctx.switches_s.begin(), hctx.switches_s.end(), t) == hctx.switches_s.end())
        hctx.switches_s.push_back(t);
  std::sort(hctx.switches_s.begin(), hctx.switches_s.end());
  md += learning_md;
  if (hla_goal && sc.learning.rounds == 0) {
    md += bench::hla_markdown(rows, hctx);
    std::ofstream(out + "/timelines.csv") << bench::timelines_csv(rows);
    for (const auto& d : datasets) {
      std::vector<const bench::RunRow*> firsts;
      for (const auto& c : clients) {
        if (c.kind != "xferctl" || c.goal == "static") continue;
        for (const auto& r : rows)
          if (r.dataset == d.id && r.client == c.name && r.verified && !r.timeline.empty()) {
            firsts.push_back(&r);
            break;
          }
      }
      std::ofstream(out + "/timeline-" + d.id + ".svg")
          << bench::timeline_svg(sc.name + ": " + d.id + ", throughput per interval (first run of each)", firsts, hctx);
    }
  }
  std::ofstream(out + "/summary.md") << md;
  for (const auto& d : datasets) {
    std::vector<bench::Summary> part;
    for (const auto& s : summary)
      if (s.dataset == d.id) part.push_back(s);
    std::ofstream(out + "/plot-" + d.id + ".svg") << bench::svg_plot(sc.name + ": " + d.id, part);
  }
  fmt::print("{}", md);
  if (g_stop) {
    fmt::print(stderr, "xfer-bench: interrupted; results so far are in {}\n", csv);
    return 130;
  }
  for (const auto& r : rows)
    if (!r.verified) return 1;
  return 0;
}
