// The parameter table: the analysis's product, the online tuners' start.
//
// Format (JSON, version 2):
//   { "format": "xferd-hla-table", "version": 1,
//     "generated_unix": T, "history": "where it was learnt from", "rows_used": N,
//     "strata": [ {
//        "id": "P1/D2/L1",
//        "path":    {"link_mbps", "rtt_ms", "loss_pct"},           tier 1 (centroid)
//        "dataset": {"files", "bytes", "size_mean", "size_sd"},     tier 2 (centroid)
//        "ext_load": [lo, hi],                                      tier 3
//        "load_mean": the mean load of its rows (-1: not known),
//        "rows": N, "one_frequency": true,    (the cores surface is a curve)
//        "rmse": {"throughput": [s1, s2, s3], "energy": [...], "throughput_rows", "energy_rows"},
//        "repeat_t": the repeat scatter,  "decided": "surfaces" | "measured",  "why": "...",   (optional)
//        "seconds", "explored_s": the time its samples held, and of it in exploration trials,   (optional)
//        "measured": [ {"params", "visits", "seconds", "gb", "mbps", "mbps_sd", "j_per_gb"} ],  (optional)
//        "entries": [ {"sla": "throughput" | "energy", "level", "bound",   (the steps of eq. 10 / 11)
//                      "params": {"cc", "p", "pp", "cores", "freq_khz"},
//                      "predicted": {"mbps", "j_per_gb"}, "feasible": bool} ] } ],
//     "predictor": null | {...},
//     "paths": [ {"path", "link_mbps", "rtt_ms", "loss_pct" (-1: not measured), "runs", "newest_unix"} ] }   (optional)
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fmt/format.h>

#include "xfer/hla.h"
#include "xfer/nesting.h"
#include "xfer/safe_open.h"

namespace xfer::hla {

namespace {

using nlohmann::json;

double num(const json& j, const char* key, const std::string& where, double lo, double hi) {
  if (!j.is_object() || !j.contains(key)) throw TableError(where + ": '" + key + "' is missing");
  const json& v = j[key];
  if (!v.is_number()) throw TableError(where + ": '" + key + "' is not a number");
  double d = v.get<double>();
  if (!std::isfinite(d) || d < lo || d > hi)
    throw TableError(fmt::format("{}: '{}' = {} is outside {}..{}", where, key, d, lo, hi));
  return d;
}

int whole(const json& j, const char* key, const std::string& where, int lo, int hi) {
  double d = num(j, key, where, lo, hi);
  if (d != std::floor(d)) throw TableError(fmt::format("{}: '{}' = {} is not a whole number", where, key, d));
  return int(d);
}

const json& member(const json& j, const char* key, const std::string& where, json::value_t type) {
  if (!j.is_object() || !j.contains(key)) throw TableError(where + ": '" + key + "' is missing");
  const json& v = j[key];
  if (v.type() != type) throw TableError(where + ": '" + key + "' has the wrong type");
  return v;
}

Knobs knobs_of(const json& p, const std::string& ea) {
  Knobs kn;
  kn.cc = whole(p, "cc", ea, 1, Knobs::kMaxCc);
  kn.p = whole(p, "p", ea, 1, Knobs::kMaxP);
  kn.pp = whole(p, "pp", ea, 1, Knobs::kMaxPp);
  kn.cores = whole(p, "cores", ea, 1, Knobs::kMaxCores);
  kn.freq_khz = long(num(p, "freq_khz", ea, 0, Knobs::kMaxFreqKhz));
  return kn;
}

}  // namespace

json to_json(const ParamTable& t) {
  json strata = json::array();
  for (const TableStratum& s : t.strata) {
    json entries = json::array();
    for (const TableEntry& e : s.entries) {
      const Knobs& k = e.choice.knobs;
      entries.push_back({{"sla", e.sla},
                         {"level", e.level},
                         {"bound", e.bound},
                         {"params", {{"cc", k.cc}, {"p", k.p}, {"pp", k.pp}, {"cores", k.cores}, {"freq_khz", k.freq_khz}}},
                         {"predicted", {{"mbps", e.choice.mbps}, {"j_per_gb", e.choice.j_per_gb}}},
                         {"feasible", e.choice.feasible}});
    }
    json measured = json::array();
    for (const MeasuredSetting& m : s.measured) {
      const Knobs& k = m.knobs;
      measured.push_back({{"params", {{"cc", k.cc}, {"p", k.p}, {"pp", k.pp}, {"cores", k.cores}, {"freq_khz", k.freq_khz}}},
                          {"visits", m.visits},
                          {"seconds", m.seconds},
                          {"gb", m.gb},
                          {"mbps", m.mbps},
                          {"mbps_sd", m.mbps_sd},
                          {"j_per_gb", m.j_per_gb}});
    }
    strata.push_back({{"id", s.id},
                      {"path", {{"link_mbps", s.link_mbps}, {"rtt_ms", s.rtt_ms}, {"loss_pct", s.loss_pct}}},
                      {"dataset", {{"files", s.files}, {"bytes", s.bytes}, {"size_mean", s.size_mean}, {"size_sd", s.size_sd}}},
                      {"ext_load", {s.load_lo, s.load_hi}},
                      {"load_mean", s.load_mean},
                      {"rows", s.rows},
                      {"one_frequency", s.one_frequency},
                      {"rmse",
                       {{"throughput", s.rmse_t}, {"energy", s.rmse_e}, {"throughput_rows", s.rmse_t_rows},
                        {"energy_rows", s.rmse_e_rows}}},
                      {"repeat_t", s.repeat_t},
                      {"seconds", s.seconds},
                      {"explored_s", s.explored_s},
                      {"decided", s.decided},
                      {"why", s.why},
                      {"measured", measured},
                      {"entries", entries}});
  }
  json paths = json::array();
  for (const PathFacts& f : t.paths)
    paths.push_back({{"path", f.path},
                     {"link_mbps", f.link_mbps},
                     {"rtt_ms", f.rtt_ms},
                     {"loss_pct", f.loss_pct},
                     {"runs", f.runs},
                     {"newest_unix", f.newest_unix}});
  return {{"format", kTableFormat}, {"version", t.version}, {"generated_unix", t.generated_unix},
          {"history", t.history},   {"rows_used", t.rows_used}, {"strata", strata},
          {"predictor", t.predictor}, {"paths", paths}};
}

ParamTable table_from_json(const json& j) {
  if (!j.is_object()) throw TableError("not a parameter table: the top level is not an object");
  if (!j.contains("format") || j["format"] != kTableFormat)
    throw TableError(std::string("not a parameter table: 'format' is not \"") + kTableFormat + "\"");
  int version = whole(j, "version", "table", 0, 1000000);
  if (version != kTableVersion)
    throw TableError(fmt::format("a parameter table of version {}; this program reads version {} (run xfer-hla "
                                 "analyze again)", version, kTableVersion));
  ParamTable t;
  t.generated_unix = num(j, "generated_unix", "table", 0, 1e11);
  t.history = member(j, "history", "table", json::value_t::string).get<std::string>();
  t.rows_used = size_t(num(j, "rows_used", "table", 0, 1e15));
  const json& strata = member(j, "strata", "table", json::value_t::array);
  for (size_t i = 0; i < strata.size(); ++i) {
    const json& s = strata[i];
    std::string at = fmt::format("stratum {}", i + 1);
    TableStratum st;
    st.id = member(s, "id", at, json::value_t::string).get<std::string>();
    if (st.id.empty() || st.id.size() > 64) throw TableError(at + ": 'id' must be 1 to 64 characters");
    at = "stratum " + st.id;
    const json& path = member(s, "path", at, json::value_t::object);
    st.link_mbps = num(path, "link_mbps", at + " path", 0, 1e7);
    st.rtt_ms = num(path, "rtt_ms", at + " path", 0, 1e6);
    st.loss_pct = num(path, "loss_pct", at + " path", 0, 100);
    const json& ds = member(s, "dataset", at, json::value_t::object);
    st.files = num(ds, "files", at + " dataset", 0, 1e12);
    st.bytes = num(ds, "bytes", at + " dataset", 0, 1e19);
    st.size_mean = num(ds, "size_mean", at + " dataset", 0, 1e19);
    st.size_sd = num(ds, "size_sd", at + " dataset", 0, 1e19);
    const json& load = member(s, "ext_load", at, json::value_t::array);
    if (load.size() != 2 || !load[0].is_number() || !load[1].is_number())
      throw TableError(at + ": 'ext_load' must be [low, high]");
    st.load_lo = load[0].get<double>(), st.load_hi = load[1].get<double>();
    if (!(st.load_lo >= 0 && st.load_lo <= st.load_hi && st.load_hi <= 1))
      throw TableError(at + ": 'ext_load' must be 0 <= low <= high <= 1");
    st.load_mean = num(s, "load_mean", at, -1, 1);
    st.rows = size_t(num(s, "rows", at, 0, 1e15));
    st.one_frequency = member(s, "one_frequency", at, json::value_t::boolean).get<bool>();
    const json& rmse = member(s, "rmse", at, json::value_t::object);
    for (const char* which : {"throughput", "energy"}) {
      const json& a = member(rmse, which, at + " rmse", json::value_t::array);
      if (a.size() != 3) throw TableError(at + ": rmse '" + which + "' must have 3 numbers");
      for (size_t k = 0; k < 3; ++k) {
        if (!a[k].is_number() || !std::isfinite(a[k].get<double>()) || a[k].get<double>() < 0)
          throw TableError(at + ": rmse '" + which + "' must hold numbers >= 0");
        (which[0] == 't' ? st.rmse_t : st.rmse_e)[k] = a[k].get<double>();
      }
    }
    st.rmse_t_rows = num(rmse, "throughput_rows", at + " rmse", 0, 1e9);
    st.rmse_e_rows = num(rmse, "energy_rows", at + " rmse", 0, 1e9);
    // Since the table from everyday history (optional: a table written
    // before says nothing of them; its entries came from surfaces).
    if (s.contains("repeat_t")) st.repeat_t = num(s, "repeat_t", at, 0, 1e9);
    // Since the exploration budget across jobs (optional likewise: none
    // known, the budget is the job's own).
    if (s.contains("seconds")) st.seconds = num(s, "seconds", at, 0, 1e12);
    if (s.contains("explored_s")) st.explored_s = num(s, "explored_s", at, 0, st.seconds);
    if (s.contains("decided")) {
      st.decided = member(s, "decided", at, json::value_t::string).get<std::string>();
      if (st.decided != "surfaces" && st.decided != "measured")
        throw TableError(at + ": 'decided' must be \"surfaces\" or \"measured\"");
    }
    if (s.contains("why")) {
      st.why = member(s, "why", at, json::value_t::string).get<std::string>();
      if (st.why.size() > 1000) throw TableError(at + ": 'why' is longer than 1000 characters");
    }
    if (s.contains("measured")) {
      const json& ms = member(s, "measured", at, json::value_t::array);
      for (size_t k = 0; k < ms.size(); ++k) {
        const json& e = ms[k];
        std::string ea = fmt::format("{} measured setting {}", at, k + 1);
        if (!e.is_object()) throw TableError(ea + ": not an object");
        MeasuredSetting m;
        m.knobs = knobs_of(member(e, "params", ea, json::value_t::object), ea);
        m.visits = size_t(num(e, "visits", ea, 1, 1e12));
        m.seconds = num(e, "seconds", ea, 0, 1e12);
        m.gb = num(e, "gb", ea, 0, 1e12);
        m.mbps = num(e, "mbps", ea, 0, 1e9);
        m.mbps_sd = num(e, "mbps_sd", ea, 0, 1e9);
        m.j_per_gb = num(e, "j_per_gb", ea, 0, 1e15);
        st.measured.push_back(m);
      }
    }
    const json& entries = member(s, "entries", at, json::value_t::array);
    for (size_t k = 0; k < entries.size(); ++k) {
      const json& e = entries[k];
      std::string ea = fmt::format("{} entry {}", at, k + 1);
      TableEntry te;
      te.sla = member(e, "sla", ea, json::value_t::string).get<std::string>();
      if (te.sla != "throughput" && te.sla != "energy")
        throw TableError(ea + ": 'sla' must be \"throughput\" or \"energy\"");
      te.level = num(e, "level", ea, 0, 1000);
      te.bound = num(e, "bound", ea, 0, 1e12);
      te.choice.knobs = knobs_of(member(e, "params", ea, json::value_t::object), ea);
      const json& pr = member(e, "predicted", ea, json::value_t::object);
      te.choice.mbps = num(pr, "mbps", ea, -1e12, 1e12);
      te.choice.j_per_gb = num(pr, "j_per_gb", ea, -1e15, 1e15);
      te.choice.feasible = member(e, "feasible", ea, json::value_t::boolean).get<bool>();
      st.entries.push_back(std::move(te));
    }
    t.strata.push_back(std::move(st));
  }
  if (j.contains("predictor")) {
    const json& p = j["predictor"];
    if (!p.is_null() && !p.is_object()) throw TableError("table: 'predictor' must be an object or null");
    t.predictor = p;
  }
  if (j.contains("paths")) {  // (tables written before it have none)
    const json& paths = member(j, "paths", "table", json::value_t::array);
    if (paths.size() > kMaxTablePaths)
      throw TableError(fmt::format("table: {} paths, more than {}", paths.size(), kMaxTablePaths));
    for (size_t i = 0; i < paths.size(); ++i) {
      const json& f = paths[i];
      const std::string at = fmt::format("path {}", i + 1);
      PathFacts pf;
      pf.path = member(f, "path", at, json::value_t::string).get<std::string>();
      if (pf.path.empty() || pf.path.size() > 600) throw TableError(at + ": 'path' must be 1 to 600 characters");
      pf.link_mbps = num(f, "link_mbps", at, 0, 1e7);
      pf.rtt_ms = num(f, "rtt_ms", at, 0, 1e6);
      pf.loss_pct = num(f, "loss_pct", at, -1, 100);
      if (pf.loss_pct < 0) pf.loss_pct = -1;
      pf.runs = size_t(whole(f, "runs", at, 0, 2000000000));
      pf.newest_unix = num(f, "newest_unix", at, 0, 1e11);
      t.paths.push_back(std::move(pf));
    }
  }
  return t;
}

const PathFacts* find_path(const ParamTable& t, const std::string& origin, const std::string& dest_host) {
  const std::string k = path_key(origin, dest_host);
  if (k.empty()) return nullptr;
  for (const PathFacts& f : t.paths)
    if (f.path == k) return &f;
  return nullptr;
}

void save_table(const ParamTable& t, const std::string& path) {
  std::string tmp = path + ".tmp";
  std::string text = to_json(t).dump(1) + "\n";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) throw TableError(tmp + ": " + std::strerror(errno));
  size_t off = 0;
  while (off < text.size()) {
    ssize_t n = ::write(fd, text.data() + off, text.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      std::string why = std::strerror(errno);
      ::close(fd);
      ::unlink(tmp.c_str());
      throw TableError(tmp + ": " + why);
    }
    off += size_t(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    ::unlink(tmp.c_str());
    throw TableError(tmp + ": " + std::strerror(errno));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    std::string why = std::strerror(errno);
    ::unlink(tmp.c_str());
    throw TableError(path + ": " + why);
  }
}

ParamTable table_from_text(std::string_view text, const std::string& what) {
  json j;
  try {
    j = parse_json_bounded(text, what);
  } catch (const NestingError& e) {
    throw TableError(e.what());
  }
  if (j.is_discarded()) throw TableError(what + ": not JSON (a parameter table is the JSON xfer-hla analyze writes)");
  try {
    return table_from_json(j);
  } catch (const TableError& e) {
    throw TableError(what + ": " + e.what());
  }
}

ParamTable load_table(const std::string& path) {
  std::string text;
  try {
    text = read_trusted_file(path, 64u << 20, "parameter table");
  } catch (const std::exception& e) {
    throw TableError(e.what());
  }
  return table_from_text(text, path);
}

std::string describe(const ParamTable& t) {
  size_t entries = 0;
  for (const auto& s : t.strata) entries += s.entries.size();
  return fmt::format("{} strata, {} entries from {} rows of {} (version {}){}", t.strata.size(), entries, t.rows_used,
                     t.history, t.version, t.predictor.is_null() ? "" : ", with a predictor");
}

std::string known_strata(const ParamTable& t, size_t most) {
  std::string out;
  for (size_t i = 0; i < t.strata.size() && i < most; ++i) {
    const TableStratum& s = t.strata[i];
    out += fmt::format("{}{} {:.0f} Mbit/s {:.0f} ms {:.3f}% loss, {:.0f} files of {:.1f} MB, load {:.2f}-{:.2f}: {}",
                       out.empty() ? "" : "; ", s.id, s.link_mbps, s.rtt_ms, s.loss_pct, s.files, s.size_mean / 1e6,
                       s.load_lo, s.load_hi,
                       s.decided == "surfaces" ? fmt::format("surfaces over {} rows", s.rows)
                                               : fmt::format("{} measured settings", s.measured.size()));
  }
  if (t.strata.size() > most) out += fmt::format("; and {} more", t.strata.size() - most);
  return out;
}

}  // namespace xfer::hla
