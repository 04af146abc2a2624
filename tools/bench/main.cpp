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
// ratios to the best peer), DIR/plot-DATASET.svg.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <csignal>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <algorithm>
#include <nlohmann/json.hpp>

#include "cross.h"
#include "measure.h"
#include "report.h"
#include "scenario.h"
#include "xfer/datagen.h"
#include "xfer/power_model.h"

namespace fs = std::filesystem;

namespace {

volatile std::sig_atomic_t g_stop = 0;
void on_signal(int) { g_stop = 1; }

std::string self_dir() { return fs::read_symlink("/proc/self/exe").parent_path().string(); }

std::string source_dir() {
  if (const char* e = getenv("XFER_SOURCE_DIR")) return e;
  return XFER_SOURCE_DIR;
}

int sh(const std::string& cmd) {
  int st = std::system(cmd.c_str());
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

// The emulated link, as a child process (xfer-linkemu up).
class LinkProcess {
 public:
  LinkProcess(const bench::Scenario& s, const std::string& name, int index, const std::string& log) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
    const auto& l = s.link;
    std::vector<std::string> a = {self_dir() + "/xfer-linkemu", "up", "--name", name, "--index", std::to_string(index),
                                  "--rate-mbps", fmt::format("{}", l.rate_mbps), "--rtt-ms", fmt::format("{}", l.rtt_ms),
                                  "--loss-pct", fmt::format("{}", l.loss_pct), "--jitter-ms", fmt::format("{}", l.jitter_ms),
                                  "--mtu", std::to_string(l.mtu)};
    if (l.queue_bytes) a.insert(a.end(), {"--queue-bytes", std::to_string(l.queue_bytes)});
    if (l.client_rmem_max) a.insert(a.end(), {"--client-rmem-max", std::to_string(l.client_rmem_max)});
    pid_ = fork();
    if (pid_ == 0) {
      dup2(fds[1], 1);
      int err = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(err, 2);
      std::vector<char*> av;
      for (auto& x : a) av.push_back(const_cast<char*>(x.c_str()));
      av.push_back(nullptr);
      execv(av[0], av.data());
      _exit(127);
    }
    close(fds[1]);
    out_ = fds[0];
    std::string line = read_line(15000);
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.value("ready", false)) {
      stop();
      throw std::runtime_error("xfer-linkemu did not come up (see " + log + "): " + line);
    }
    client_ns = j["client_ns"], server_ns = j["server_ns"], server_ip = j["server_ip"];
  }
  ~LinkProcess() { stop(); }
  // The counters it prints when it stops.
  std::string stop() {
    if (pid_ <= 0) return "";
    kill(pid_, SIGTERM);
    std::string last = read_line(15000);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
    close(out_);
    return last;
  }
  std::string client_ns, server_ns, server_ip;

 private:
  std::string read_line(int timeout_ms) {
    std::string line;
    char c;
    while (true) {
      pollfd p{out_, POLLIN, 0};
      if (poll(&p, 1, timeout_ms) <= 0) break;
      if (read(out_, &c, 1) != 1 || c == '\n') break;
      line += c;
    }
    return line;
  }
  pid_t pid_ = -1;
  int out_ = -1;
};

struct PreparedDataset {
  std::string id;  // directory under the data root, and the dataset's label
  std::vector<bench::ExpectedFile> files;
  uint64_t bytes = 0;
};

PreparedDataset prepare(const bench::DatasetSpec& d, bool quick, const std::string& root) {
  xfer::DatasetSpec spec;
  spec.shape = d.shape;
  spec.scale = quick ? d.quick_scale : d.scale;
  spec.size_scale = quick ? d.quick_size_scale : d.size_scale;
  spec.seed = d.seed;
  PreparedDataset p;
  p.id = fmt::format("{}-x{:g}-s{:g}-seed{}", d.shape, spec.scale, spec.size_scale, d.seed);
  std::string dir = root + "/" + p.id, list = dir + ".list";
  if (!fs::exists(list)) {
    fmt::print(stderr, "xfer-bench: generating dataset {}\n", p.id);
    auto files = xfer::write_dataset(spec, dir);
    std::ofstream out(list + ".tmp");
    for (auto& f : files) out << f.name << " " << f.size << " " << f.sha256 << "\n";
    out.close();
    fs::rename(list + ".tmp", list);
  }
  std::ifstream in(list);
  bench::ExpectedFile f;
  while (in >> f.name >> f.size >> f.sha256) {
    p.files.push_back(f);
    p.bytes += f.size;
  }
  return p;
}

// The command line of one client, its input files written under inputs/.
std::vector<std::string> client_argv(const bench::ClientSpec& c, const PreparedDataset& d, const std::string& base_url,
                                     const std::string& inputs, const std::string& dest, double rate_mbps) {
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
  std::string proto = c.port == "h2c" ? "--http2-prior-knowledge" : "--http1.1";
  std::vector<std::string> a;
  if (c.kind == "xferctl") {
    a = {self_dir() + "/xferctl", "run", "--manifest", manifest, "--dest", dest, "--json", "--no-progress",
         "--bandwidth-mbps", fmt::format("{}", rate_mbps)};
  } else if (c.kind == "curl-seq") {
    a = {"curl", "-s", "-S", "--fail", proto, "-K", cfg};
  } else if (c.kind == "curl-parallel") {
    a = {"curl", "-s", "-S", "--fail", proto, "-Z", "--parallel-max", std::to_string(c.parallel), "-K", cfg};
  } else if (c.kind == "wget") {
    a = {"wget", "-nv", "-i", urls, "-P", dest};
  } else if (c.kind == "aria2c") {
    a = {"aria2c", "-i", urls, "-d", dest, "-j", std::to_string(c.parallel), "-x", std::to_string(c.split), "-s",
         std::to_string(c.split), "--min-split-size=1M", "--file-allocation=none", "--auto-file-renaming=false",
         "--allow-overwrite=true", "--summary-interval=0", "--console-log-level=error", "--max-tries=5"};
  }
  a.insert(a.end(), c.args.begin(), c.args.end());
  return a;
}

// What xferctl --json said of its tuning (its stdout, kept in the run's log).
void read_tuning(const std::string& path, bench::RunRow* r) {
  std::ifstream f(path);
  auto j = nlohmann::json::parse(f, nullptr, false);
  if (j.is_discarded() || !j.contains("tuner")) return;
  const auto& t = j["tuner"];
  if (t.contains("chosen") && t["chosen"].is_number() && t["chosen"].get<double>() > 0) r->chosen = t["chosen"];
  if (t.contains("target_mbps")) r->target_mbps = t["target_mbps"];
  if (t.contains("controlled_mean_mbps")) r->controlled_mbps = t["controlled_mean_mbps"];
  std::vector<double> v;
  const auto& tl = j["timeline"];
  for (size_t i = 1; i + 1 < tl.size(); ++i) v.push_back(tl[i].value("throughput_mbps", 0.0));
  if (!v.empty()) r->steady_mbps = bench::median(v);
}

pid_t nginx_master(const std::string& run) {
  std::ifstream f(run + "/nginx.pid");
  pid_t p = 0;
  f >> p;
  return p;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"xfer-bench: xferctl against curl, wget and aria2c on an emulated link"};
  std::string scenario_path, out, data_root, only_dataset, only_client;
  bool quick = false;
  int repeat = 0, index = 0;
  app.add_option("scenario", scenario_path, "scenario file (TOML), e.g. tests/bench/wan.toml")->required();
  app.add_option("--out", out, "output directory")->required();
  app.add_flag("--quick", quick, "shrink the datasets (quick_scale) and default to one repeat");
  app.add_option("--repeat", repeat, "runs per client and dataset (default 3, 1 with --quick)")->check(CLI::Range(1, 50));
  app.add_option("--data", data_root, "where datasets are generated and kept (default OUT/data)");
  app.add_option("--dataset", only_dataset, "only the dataset of this shape");
  app.add_option("--client", only_client, "only clients whose name contains this");
  app.add_option("--index", index, "link subnet index (default: from the pid)")->check(CLI::Range(1, 250));
  CLI11_PARSE(app, argc, argv);
  if (repeat == 0) repeat = quick ? 1 : 3;
  if (index == 0) index = 100 + getpid() % 150;

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
      if (only_dataset.empty() || d.shape == only_dataset) datasets.push_back(prepare(d, quick, data_root));
  } catch (const std::exception& e) {
    fmt::print(stderr, "xfer-bench: dataset: {}\n", e.what());
    return 1;
  }
  std::vector<bench::ClientSpec> clients;
  for (const auto& c : sc.clients)
    if (only_client.empty() || c.name.find(only_client) != std::string::npos) clients.push_back(c);

  std::string link_name = "bench" + std::to_string(index);
  std::unique_ptr<LinkProcess> link;
  std::string run_dir = out + "/nginx";
  auto stop_nginx = [&] { sh("bash " + source_dir() + "/scripts/nginx-serve.sh stop " + run_dir + " >/dev/null 2>&1"); };
  try {
    link = std::make_unique<LinkProcess>(sc, link_name, index, out + "/logs/linkemu.err");
    if (sh("ip netns exec " + link->server_ns + " bash " + source_dir() + "/scripts/nginx-serve.sh start " + run_dir + " " +
           data_root + " 8080 8081 2m " + link->server_ip) != 0)
      throw std::runtime_error("nginx did not start in " + link->server_ns + "; see " + run_dir + "/error.log");
  } catch (const std::exception& e) {
    fmt::print(stderr, "xfer-bench: {}\n", e.what());
    stop_nginx();
    return 1;
  }
  pid_t nginx = nginx_master(run_dir);
  const int cores = int(sysconf(_SC_NPROCESSORS_ONLN));
  xfer::CpuPowerModel model;
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
  for (const auto& d : datasets) {
    for (int rep = 1; rep <= repeat && !g_stop; ++rep) {
      for (size_t ci = 0; ci < clients.size() && !g_stop; ++ci) {
        const auto& c = clients[ci];
        std::string work = out + "/work/" + d.id + "/" + std::to_string(ci);
        std::string dest = work + "/dest";
        fs::remove_all(dest);
        fs::create_directories(dest);
        std::string base = "http://" + link->server_ip + (c.port == "h2c" ? ":8081/" : ":8080/");
        auto argv_c = client_argv(c, d, base, work, dest, sc.link.rate_mbps);
        std::vector<std::string> full = {"ip", "netns", "exec", link->client_ns};
        full.insert(full.end(), argv_c.begin(), argv_c.end());
        double srv0 = bench::process_tree_cpu_s(nginx);
        traffic.start();
        std::string log = fmt::format("{}/logs/{}-{}-r{}", out, d.id, ci, rep);
        bench::Exec e = bench::run_measured(full, log, 1800);
        traffic.stop();
        double srv1 = bench::process_tree_cpu_s(nginx);

        bench::RunRow r;
        r.scenario = sc.name, r.dataset = d.id, r.client = c.name, r.kind = c.kind, r.repeat = rep;
        r.exit_code = e.exit_code, r.wall_s = e.wall_s, r.files = d.files.size();
        r.files_ok = bench::verify_files(dest, d.files, &r.bytes);
        r.verified = r.files_ok == r.files;
        r.throughput_mbps = double(r.bytes) * 8 / e.wall_s / 1e6;
        r.client_cpu_s = e.cpu_s, r.server_cpu_s = srv1 - srv0;
        r.client_j = model.energy_j(r.client_cpu_s, r.wall_s, cores);
        r.server_j = model.energy_j(r.server_cpu_s, r.wall_s, cores);
        r.j_per_gb = r.bytes ? r.client_j / (double(r.bytes) / 1e9) : 0;
        r.energy_source = xfer::CpuPowerModel::kSource;
        r.goal = c.goal;
        if (c.kind == "xferctl") read_tuning(log + ".out", &r);
        csv_out << bench::csv_line(r) << "\n" << std::flush;
        rows.push_back(r);
        fmt::print(stderr, "[{}/{}] {} {} #{}: {:.1f} Mbit/s, {:.2f} s, CPU {:.2f} s, {:.1f} J/GB (model), {}\n", ++done,
                   total, d.id, c.name, rep, r.throughput_mbps, r.wall_s, r.client_cpu_s, r.j_per_gb,
                   r.verified ? "verified" : fmt::format("NOT VERIFIED: {}/{} files, exit {}", r.files_ok, r.files, r.exit_code));
        fs::remove_all(dest);
      }
    }
  }
  stop_nginx();
  std::string counters = link->stop();
  std::ofstream(out + "/logs/linkemu.json") << counters << "\n";

  auto summary = bench::summarize(rows);
  std::string md = bench::markdown(sc.name + (quick ? " (quick)" : ""), summary, xfer::CpuPowerModel::kSource);
  bool any_goal = false;
  for (const auto& c : clients) any_goal |= !c.goal.empty();
  if (any_goal) md += bench::goals_markdown(rows, sc.link.rate_mbps);
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
