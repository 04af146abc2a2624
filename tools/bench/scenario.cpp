#include "scenario.h"

#include <filesystem>
#include <set>
#include <stdexcept>
#include <toml++/toml.h>

namespace bench {
namespace {

std::string where(const std::string& path, const toml::node& n) {
  return path + ":" + std::to_string(n.source().begin.line);
}

template <typename T>
T get(const toml::table& t, const char* key, T fallback) {
  if (auto v = t[key].value<T>()) return *v;
  return fallback;
}

// The tables of an array of tables [[key]], in order; anything else in it
// is an error naming its line.
std::vector<const toml::table*> tables_of(const toml::table& root, const std::string& key, const std::string& path) {
  std::vector<const toml::table*> out;
  if (auto* arr = root[key].as_array())
    for (auto& n : *arr) {
      auto* t = n.as_table();
      if (!t) throw std::runtime_error(where(path, n) + ": [[" + key + "]] must be a table");
      out.push_back(t);
    }
  return out;
}

}  // namespace

LinkSpec parse_link(const toml::table& l, const std::string& path) {
  LinkSpec k;
  k.rate_mbps = get<double>(l, "rate_mbps", 1000);
  k.rtt_ms = get<double>(l, "rtt_ms", 0);
  k.loss_pct = get<double>(l, "loss_pct", 0);
  k.jitter_ms = get<double>(l, "jitter_ms", 0);
  k.queue_bytes = get<int64_t>(l, "queue_bytes", 0);
  k.mtu = int(get<int64_t>(l, "mtu", 1500));
  k.client_rmem_max = get<int64_t>(l, "client_rmem_max", 0);
  k.loopback = get<bool>(l, "loopback", false);
  if (k.loopback && (k.rtt_ms != 0 || k.loss_pct != 0 || k.jitter_ms != 0))
    throw std::runtime_error(where(path, l) + ": a loopback link has no rtt_ms, loss_pct or jitter_ms");
  if (k.rate_mbps <= 0) throw std::runtime_error(where(path, l) + ": rate_mbps must be positive");
  return k;
}

std::vector<DatasetSpec> parse_datasets(const toml::table& root, const std::string& path) {
  static const std::set<std::string> shapes = {"html", "image", "video", "mixed", "lognormal"};
  std::vector<DatasetSpec> out;
  for (const toml::table* t : tables_of(root, "dataset", path)) {
    DatasetSpec d;
    d.shape = get<std::string>(*t, "shape", "");
    if (!shapes.count(d.shape)) throw std::runtime_error(where(path, *t) + ": unknown shape '" + d.shape + "'");
    d.scale = get<double>(*t, "scale", 1);
    d.quick_scale = get<double>(*t, "quick_scale", d.scale / 10);
    d.size_scale = get<double>(*t, "size_scale", 1);
    d.quick_size_scale = get<double>(*t, "quick_size_scale", d.size_scale);
    d.seed = get<int64_t>(*t, "seed", 1);
    out.push_back(d);
  }
  return out;
}

toml::table parse_toml(const std::string& path) {
  try {
    return toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    throw std::runtime_error(path + ":" + std::to_string(e.source().begin.line) + ": " + std::string(e.description()));
  }
}

Scenario load_scenario(const std::string& path) {
  toml::table root = parse_toml(path);
  Scenario s;
  s.path = path;
  s.name = get<std::string>(root, "name", "");
  if (s.name.empty()) throw std::runtime_error(path + ": 'name' missing");
  if (auto* l = root["link"].as_table()) s.link = parse_link(*l, path);
  else throw std::runtime_error(path + ": [link] missing");
  for (const toml::table* t : tables_of(root, "cross", path)) {
    s.cross.push_back({get<double>(*t, "start_s", 0), get<double>(*t, "stop_s", 0), get<double>(*t, "pct", 0)});
  }
  s.datasets = parse_datasets(root, path);
  if (auto* h = root["hla"].as_table()) {
    s.hla.plan = get<std::string>(*h, "plan", "");
    if (s.hla.plan.empty()) throw std::runtime_error(where(path, *h) + ": [hla] needs plan = \"PLAN.toml\"");
    if (s.hla.plan[0] != '/') s.hla.plan = (std::filesystem::path(path).parent_path() / s.hla.plan).string();
  }
  if (auto* l = root["learning"].as_table()) {
    s.learning.rounds = int(get<int64_t>(*l, "rounds", 0));
    if (s.learning.rounds < 1 || s.learning.rounds > 100)
      throw std::runtime_error(where(path, *l) + ": [learning] needs rounds = 1..100");
    if (!s.hla.plan.empty())
      throw std::runtime_error(where(path, *l) + ": [learning] makes its own history; it does not go with [hla]");
  }
  for (const toml::table* t : tables_of(root, "job", path)) {
    SetJobSpec j;
    j.name = get<std::string>(*t, "name", "");
    j.algorithm = get<std::string>(*t, "algorithm", "");
    j.cls = get<std::string>(*t, "class", "normal");
    j.goal = get<std::string>(*t, "goal", "");
    j.user = uint32_t(get<int64_t>(*t, "user", 1000));
    j.start_s = get<double>(*t, "start_s", 0);
    j.target_mbps = get<double>(*t, "target_mbps", 0);
    const int64_t d = get<int64_t>(*t, "dataset", 0);
    if (j.name.empty() || j.algorithm.empty()) throw std::runtime_error(where(path, *t) + ": [[job]] needs name and algorithm");
    if (d < 0 || size_t(d) >= s.datasets.size())
      throw std::runtime_error(where(path, *t) + ": dataset " + std::to_string(d) + " is not one of the [[dataset]]s");
    static const std::set<std::string> goals = {"", "floor", "bulk", "background", "equal"};
    if (!goals.count(j.goal)) throw std::runtime_error(where(path, *t) + ": unknown goal '" + j.goal + "'");
    if (j.goal == "floor" && j.target_mbps <= 0) throw std::runtime_error(where(path, *t) + ": a floor job needs target_mbps");
    j.dataset = size_t(d);
    s.jobs.push_back(j);
  }
  static const std::set<std::string> kinds = {"xferctl", "curl-seq", "curl-parallel", "wget", "aria2c"};
  for (const toml::table* t : tables_of(root, "client", path)) {
    ClientSpec c;
    c.kind = get<std::string>(*t, "kind", "");
    if (!kinds.count(c.kind)) throw std::runtime_error(where(path, *t) + ": unknown client kind '" + c.kind + "'");
    c.name = get<std::string>(*t, "name", c.kind);
    c.port = get<std::string>(*t, "port", "h1");
    if (c.port != "h1" && c.port != "h2c" && c.port != "https")
      throw std::runtime_error(where(path, *t) + ": port is h1, h2c or https");
    if (c.port == "h2c" && (c.kind == "wget" || c.kind == "aria2c"))
      throw std::runtime_error(where(path, *t) + ": " + c.kind + " does not speak h2c");
    c.parallel = int(get<int64_t>(*t, "parallel", 16));
    c.split = int(get<int64_t>(*t, "split", 4));
    c.goal = get<std::string>(*t, "goal", "");
    if (!c.goal.empty() && c.kind != "xferctl") throw std::runtime_error(where(path, *t) + ": only xferctl clients have a goal");
    static const std::set<std::string> goals = {"max-throughput", "min-energy", "energy-efficient", "ee-sweep", "target",
                                                "floor", "hla-throughput", "hla-energy", "static", "engine"};
    if (!c.goal.empty() && !goals.count(c.goal))
      throw std::runtime_error(where(path, *t) + ": goal is one of max-throughput, min-energy, energy-efficient, ee-sweep, "
                               "target, floor, hla-throughput, hla-energy, static, engine");
    c.program = get<std::string>(*t, "program", "");
    if (!c.program.empty() && c.kind != "xferctl") throw std::runtime_error(where(path, *t) + ": only xferctl clients have a program");
    if (!c.program.empty() && c.program[0] != '/')
      c.program = (std::filesystem::path(path).parent_path() / c.program).string();
    if (auto* a = (*t)["args"].as_array())
      for (auto& x : *a) c.args.push_back(x.value_or(std::string()));
    c.rotate = get<bool>(*t, "rotate", false);
    if (c.rotate && !root["learning"].as_table())
      throw std::runtime_error(where(path, *t) + ": rotate goes with a [learning] scenario");
    s.clients.push_back(c);
  }
  if (s.datasets.empty()) throw std::runtime_error(path + ": no [[dataset]]");
  if (s.clients.empty() && s.jobs.empty()) throw std::runtime_error(path + ": no [[client]] and no [[job]]");
  return s;
}

}  // namespace bench
