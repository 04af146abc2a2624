// xfer-hla collect: fills a history the way the papers did (a sweep of
// static parameters over several paths, loads and dataset shapes), on
// xfer-linkemu paths of this machine. See collect.h.
#include "collect.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include "cross.h"
#include "measure.h"
#include "testbed.h"
#include "xfer/history.h"

namespace fs = std::filesystem;

namespace hlatool {

namespace {

volatile std::sig_atomic_t g_stop = 0;
void on_signal(int) { g_stop = 1; }

template <typename T>
T get(const toml::table& t, const char* key, T fallback) {
  if (auto v = t[key].value<T>()) return *v;
  return fallback;
}

std::vector<int> ints(const toml::table& t, const char* key, const std::string& path) {
  std::vector<int> out;
  auto* a = t[key].as_array();
  if (!a) throw std::runtime_error(path + ": [sweep] needs '" + key + "' (a list of levels)");
  for (auto& n : *a) {
    auto v = n.value<int64_t>();
    if (!v || *v < 1 || *v > 1024) throw std::runtime_error(path + ": [sweep] " + key + ": levels are whole numbers 1-1024");
    out.push_back(int(*v));
  }
  if (out.empty()) throw std::runtime_error(path + ": [sweep] " + key + " is empty");
  return out;
}

// The design: the (cc, p) grid at the base pp and cores, plus a line over pp
// and one over cores through the base.
std::vector<Point> design(const toml::table& sw, const std::string& path, int max_cores) {
  std::vector<int> cc = ints(sw, "cc", path), p = ints(sw, "p", path), pp = ints(sw, "pp", path);
  std::vector<int> cores = ints(sw, "cores", path);
  std::vector<int> base = ints(sw, "base", path);
  if (base.size() != 4) throw std::runtime_error(path + ": [sweep] base is [cc, p, pp, cores]");
  std::set<Point> seen;
  std::vector<Point> out;
  auto add = [&](Point x) {
    x[3] = std::min(x[3], max_cores);
    if (seen.insert(x).second) out.push_back(x);
  };
  for (int a : cc)
    for (int b : p) add({a, b, base[2], base[3]});
  for (int c : pp) add({base[0], base[1], c, base[3]});
  for (int d : cores) add({base[0], base[1], base[2], d});
  return out;
}

std::string sweep_arg(const std::vector<Point>& pts) {
  std::string s;
  for (const Point& x : pts) s += fmt::format("{}{}:{}:{}:{}", s.empty() ? "" : ",", x[0], x[1], x[2], x[3]);
  return s;
}

// How often a cell's finished runs measured each point: its visits with a
// row past the settling one (as analyze counts them: one sample a visit).
std::map<Point, int> covered(xfer::hla::History& h, const std::string& label) {
  xfer::hla::HistoryData d = h.read();
  std::set<std::string> runs;
  for (const auto& r : d.runs)
    if (r.label == label && r.outcome == "done") runs.insert(r.run);
  std::map<Point, int> out;
  std::string run;
  Point at{};
  int64_t seq = -1;
  bool counted = false;
  for (const auto& i : d.intervals) {  // by run, seq, chunk
    if (!runs.count(i.run) || (i.run == run && i.seq == seq)) continue;
    Point x{int(i.cc), int(i.p), int(i.pp), int(i.cores.value_or(0))};
    if (i.run != run || x != at || i.settling) counted = false;
    run = i.run, seq = i.seq, at = x;
    if (!i.settling && !counted) {
      ++out[x];
      counted = true;
    }
  }
  return out;
}

}  // namespace

Plan load_plan(const std::string& path, bool quick, int max_cores) {
  toml::table root = bench::parse_toml(path);
  Plan p;
  p.name = get<std::string>(root, "name", "");
  if (p.name.empty()) throw std::runtime_error(path + ": 'name' missing");
  p.interval_ms = int(get<int64_t>(root, "interval_ms", 500));
  p.hold = int(get<int64_t>(root, "hold", 3));
  p.kernel = get<std::string>(root, "kernel", "affinity");
  if (p.interval_ms < 100 || p.hold < 2) throw std::runtime_error(path + ": interval_ms >= 100 and hold >= 2");
  auto* sw = root[quick ? "quick_sweep" : "sweep"].as_table();
  if (!sw) throw std::runtime_error(path + ": [" + std::string(quick ? "quick_sweep" : "sweep") + "] missing");
  p.points = design(*sw, path, max_cores);
  p.repeat = int(get<int64_t>(*sw, "repeat", 1));
  if (p.repeat < 1 || p.repeat > 20) throw std::runtime_error(path + ": [sweep] repeat is 1-20 (visits per point)");
  auto* paths = root["path"].as_array();
  if (!paths) throw std::runtime_error(path + ": no [[path]]");
  for (auto& n : *paths) {
    auto* t = n.as_table();
    if (!t) throw std::runtime_error(path + ": [[path]] must be a table");
    if (quick && !get<bool>(*t, "quick", false)) continue;
    PathSpec ps;
    ps.name = get<std::string>(*t, "name", "");
    if (ps.name.empty()) throw std::runtime_error(path + ": a [[path]] has no name");
    ps.link = bench::parse_link(*t, path);
    if (auto* l = (*t)["loads"].as_array())
      for (auto& x : *l) ps.loads.push_back(x.value_or(0.0));
    if (ps.loads.empty()) ps.loads = {0};
    if (quick) ps.loads.resize(1);
    p.paths.push_back(ps);
  }
  std::vector<bench::DatasetSpec> ds = bench::parse_datasets(root, path);
  auto* darr = root["dataset"].as_array();
  for (size_t i = 0; i < ds.size(); ++i)
    if (!quick || get<bool>(*(*darr)[i].as_table(), "quick", false)) p.datasets.push_back(ds[i]);
  if (p.paths.empty() || p.datasets.empty())
    throw std::runtime_error(path + ": the " + std::string(quick ? "quick " : "") + "plan has no path or no dataset");
  return p;
}

int collect(const Plan& plan, bool quick, const std::string& history, const std::string& out) {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  fs::create_directories(out + "/logs");
  std::string data_root = out + "/data";
  fs::create_directories(data_root);
  std::unique_ptr<xfer::hla::History> h;
  xfer::hla::HistoryOptions ho;
  ho.journal = out + "/journal.db";
  try {
    h = xfer::hla::open_history(history, ho);
  } catch (const std::exception& e) {
    fmt::print(stderr, "xfer-hla collect: {}\n", e.what());
    return 2;
  }
  std::vector<bench::PreparedDataset> datasets;
  for (const auto& d : plan.datasets) datasets.push_back(bench::prepare(d, quick, data_root));
  size_t cells = 0;
  for (const auto& p : plan.paths) cells += p.loads.size() * datasets.size();
  fmt::print(stderr, "xfer-hla collect: plan {}{}: {} paths x loads x {} datasets = {} cells, {} points each "
                     "visited {} times, {} x {} ms per visit\n",
             plan.name, quick ? " (quick)" : "", plan.paths.size(), datasets.size(), cells, plan.points.size(),
             plan.repeat, plan.hold, plan.interval_ms);
  auto t0 = std::chrono::steady_clock::now();
  size_t cell = 0;
  int index = 100 + getpid() % 120, failures = 0;
  for (const PathSpec& ps : plan.paths) {
    if (g_stop) break;
    std::unique_ptr<bench::LinkProcess> link;
    std::unique_ptr<bench::NginxInNs> server;
    try {
      link = std::make_unique<bench::LinkProcess>(ps.link, "hla" + std::to_string(index), index,
                                                  out + "/logs/linkemu-" + ps.name + ".err");
      server = std::make_unique<bench::NginxInNs>(*link, out + "/nginx", data_root);
    } catch (const std::exception& e) {
      fmt::print(stderr, "xfer-hla collect: path {}: {}\n", ps.name, e.what());
      return 1;
    }
    for (double load : ps.loads) {
      std::vector<linkemu::CrossSpec> cross;
      // iperf3 takes at most 86400 s per test; an hour covers any cell.
      if (load > 0) cross.push_back({0, 3600, load});
      linkemu::CrossTraffic traffic(link->client_ns, link->server_ns, link->server_ip, ps.link.rate_mbps, cross);
      for (const auto& d : datasets) {
        if (g_stop) break;
        ++cell;
        std::string label = fmt::format("collect/{}/{}/load{:g}/{}", plan.name, ps.name, load, d.id);
        std::string manifest = out + "/logs/" + d.id + ".manifest";
        {
          std::ofstream m(manifest);
          for (const auto& f : d.files)
            m << "http://" << link->server_ip << ":8081/" << d.id << "/" << f.name << " " << f.size << "\n";
        }
        // Runs until every point has `repeat` measured visits in finished
        // runs (a dataset too small for the whole sweep takes several runs;
        // an interrupted collect picks up here).
        size_t visits = plan.points.size() * size_t(plan.repeat);
        for (size_t attempt = 0; attempt < visits + 2 && !g_stop; ++attempt) {
          std::map<Point, int> have = covered(*h, label);
          // Pass after pass: each point as often as it still lacks visits,
          // so a point's visits lie apart and each settles anew.
          std::vector<Point> todo;
          for (int pass = 0; pass < plan.repeat; ++pass)
            for (const Point& x : plan.points) {
              // A row without cores (no core control) counts for any cores.
              int n = std::max(have[x], have[{x[0], x[1], x[2], 0}]);
              if (n + pass < plan.repeat) todo.push_back(x);
            }
          if (todo.size() > 1 && todo.front() == todo.back()) std::rotate(todo.begin(), todo.begin() + 1, todo.end());
          double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          fmt::print(stderr, "[{}/{}] {:>5.0f} s  {} (load {:g}%) {}: {} of {} visits to go\n", cell, cells, el, ps.name,
                     load, d.id, todo.size(), visits);
          if (todo.empty()) break;
          std::string dest = out + "/dest";
          fs::remove_all(dest);
          fs::create_directories(dest);
          std::vector<std::string> argv = {
              "ip", "netns", "exec", link->client_ns, bench::self_dir() + "/xferctl", "run", "--manifest", manifest,
              "--dest", dest, "--sla", "sweep", "--sweep", sweep_arg(todo), "--sweep-hold", std::to_string(plan.hold),
              "--interval-ms", std::to_string(plan.interval_ms), "--bandwidth-mbps", fmt::format("{}", ps.link.rate_mbps),
              "--rtt-ms", fmt::format("{}", std::max(0.1, ps.link.rtt_ms)), "--loss-pct",
              fmt::format("{}", ps.link.loss_pct), "--kernel", plan.kernel, "--energy-scope", "process", "--http", "h2c",
              "--history", history, "--history-journal", out + "/journal.db", "--label", label, "--no-progress", "--json"};
          std::string log = fmt::format("{}/logs/{}-{}-{:g}-{}", out, ps.name, d.id, load, attempt);
          traffic.start();
          pid_t pid = bench::spawn_logged(argv, log);
          int st = 0;
          while (waitpid(pid, &st, WNOHANG) == 0) {
            traffic.poll();
            if (g_stop) kill(pid, SIGINT);
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
          }
          traffic.stop();
          if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            ++failures;
            fmt::print(stderr, "xfer-hla collect: a run failed (exit {}); see {}.err\n",
                       WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st), log);
          }
        }
      }
    }
    server.reset();
    link->stop();
  }
  fs::remove_all(out + "/dest");
  double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  xfer::hla::HistoryData d = h->read();
  fmt::print(stderr, "xfer-hla collect: {} rows of {} runs in {} after {:.0f} s{}\n", d.intervals.size(), d.runs.size(),
             h->where(), el, failures ? fmt::format("; {} runs failed", failures) : "");
  if (g_stop) {
    fmt::print(stderr, "xfer-hla collect: interrupted; run the same command again to go on where it stopped\n");
    return 130;
  }
  return 0;
}

}  // namespace hlatool
