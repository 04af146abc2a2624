#include "xfer/options.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "xfer/arbiter.h"
#include "xfer/log.h"
#include "xfer/text.h"

namespace xfer {

namespace {

constexpr unsigned kAll = kGlobal | kPolicy | kJob | kRun;
constexpr double kMaxBytes = 9.2e18;  // below INT64_MAX, exactly representable

OptionSpec integer(std::string name, double lo, double hi, nlohmann::json def, unsigned scopes, std::string help) {
  OptionSpec o{std::move(name), OptionType::Integer};
  o.lo = lo, o.hi = hi, o.def = std::move(def), o.scopes = scopes, o.help = std::move(help);
  return o;
}

OptionSpec number(std::string name, double lo, double hi, nlohmann::json def, unsigned scopes, std::string help) {
  OptionSpec o = integer(std::move(name), lo, hi, std::move(def), scopes, std::move(help));
  o.type = OptionType::Number;
  return o;
}

OptionSpec choice(std::string name, std::vector<std::string> choices, std::string def, unsigned scopes, std::string help) {
  OptionSpec o{std::move(name), OptionType::Choice};
  o.choices = std::move(choices), o.def = std::move(def), o.scopes = scopes, o.help = std::move(help);
  return o;
}

OptionSpec text(std::string name, OptionType t, unsigned scopes, std::string help, size_t max_bytes = 4096) {
  OptionSpec o{std::move(name), t};
  o.scopes = scopes, o.help = std::move(help), o.max_bytes = max_bytes;
  return o;
}

OptionSpec in(OptionSpec o, std::string global_key, std::string flag = "") {
  o.global_key = std::move(global_key);
  o.flag = std::move(flag);
  return o;
}

std::vector<OptionSpec> make_table() {
  return {
      // The transfer engine.
      in(integer("interval_ms", 100, 600000, 5000, kGlobal | kRun, "control interval: observe, tune, apply (ms)"),
         "daemon.interval_ms"),
      integer("sync_ms", 200, 3600000, 5000, kRun,
              "received data is fdatasync'd (and so survives a power loss) this often (ms)"),
      in(number("bandwidth_mbps", 0.001, 1e7, 1000, kGlobal | kRun, "link rate in Mbit/s, for the bandwidth-delay product"),
         "network.bandwidth_mbps"),
      number("rtt_ms", 0, 100000, 0, kRun, "RTT in ms for the bandwidth-delay product (0: measured)"),
      in(choice("http", {"auto", "1.1", "h2c"}, "auto", kGlobal | kRun, "http:// origins: auto (try h2c), 1.1, h2c"),
         "network.http"),
      in(integer("wake_batch_ms", 0, 1000, 20, kGlobal | kRun,
                 "HTTP/1.1 sockets wake the engine when about this many ms of their data are waiting (SO_RCVLOWAT; "
                 "0: at every segment)"),
         "network.wake_batch_ms"),
      in(choice("direct_io", {"on", "off"}, "on", kGlobal | kRun,
                "files of 1 MiB or more are written with O_DIRECT from aligned buffers, not through the page cache "
                "(off: every file through the page cache)"),
         "daemon.direct_io"),
      in(choice("flows", {"auto", "ebpf", "tcp_info", "off"}, "auto", kGlobal | kRun,
                "per-flow metrics: auto (eBPF; `xferctl run` measures with tcp_info until its job has run 2 s and "
                "loads eBPF then, so a shorter job does not pay the load), ebpf (loaded at once), tcp_info, off; "
                "eBPF falls back to tcp_info where it cannot load, and says so"),
         "network.flows"),
      in(integer("max_file_bytes", 0, kMaxBytes, 0, kGlobal | kRun, "a file larger than this fails (0: no limit)"),
         "limits.max_file_bytes"),
      in(integer("max_channels", 1, 4096, 32, kAll,
                 "at most this many channels (files in flight) over all chunks; a job's only lowers its policy's"),
         "limits.max_channels"),
      choice("unvalidated_resume", {"refetch", "trust"}, "refetch", kPolicy | kJob | kRun,
             "a resumed file the server gives no validator for (ETag, Last-Modified) and the manifest no sha256: "
             "refetch it whole, or trust the bytes on disk to be of the version the server has now"),
      text("ca_file", OptionType::Path, kPolicy | kJob | kRun,
           "PEM CA certificates to verify https servers against instead of the system's store"),
      text("label", OptionType::Text, kJob | kRun, "a name for the job, shown by list and status (and kept in the history)", 200),
      // Many jobs on one machine (xfer/arbiter.h).
      in(text("bandwidth_schedule", OptionType::Text, kGlobal,
              "the link's rate for xferd by day and hour, e.g. \"Mon-Fri 08:00 200, Mon-Fri 18:00 off\" (xfer/bw_schedule.h)",
              4096),
         "network.schedule"),
      in(integer("max_connections_per_origin", 0, 4096, 0, kGlobal,
                 "connections open at once to one origin over all jobs, divided among the jobs that share it (0: no "
                 "limit but each job's max_channels)"),
         "limits.max_connections_per_origin"),
      choice("class", job_class_names(), "normal", kPolicy | kJob,
             "priority class for the link: foreground, high, normal, low, background (only what nobody else asks "
             "for); a job's only lowers its policy's"),
      number("weight", 0.001, 1000, 1, kPolicy, "its users' weight against other users within the class"),
      choice("admission", {"refuse", "queue"}, "refuse", kPolicy,
             "a floor (target_mbps) that does not fit beside the floors running: refused at Submit, or queued until "
             "it fits"),
      // The tuner.
      number("target_mbps", 0.001, 1e7, nullptr, kPolicy | kJob | kRun,
             "throughput-target, hla-throughput: the throughput floor in Mbit/s"),
      number("target_pct", 1, 100, nullptr, kPolicy | kJob | kRun,
             "throughput-target: the target in percent of the maximum, measured first; hla-throughput: of the "
             "stratum's best in the table"),
      number("stream_cost", 1.0001, 2, nullptr, kPolicy | kRun,
             "max-throughput: Falcon's cost per stream K (1.02 in the paper): channels searched online for the most "
             "throughput / K^channels, so that xferds sharing a bottleneck split it without adding streams"),
      number("energy_budget_j_per_gb", 0.001, 1e9, nullptr, kPolicy | kJob | kRun,
             "hla-energy: the energy ceiling in J/GB (none: least energy)"),
      number("explore_share", 0, 0.5, 0.1, kPolicy | kRun,
             "hla-energy, hla-throughput: the most of a job's intervals spent exploring settings next to the one in "
             "use that the history lacks or knows poorly, within the SLA (0: none)"),
      integer("search_step", 1, 1024, nullptr, kPolicy | kRun, "energy-efficient: cc step of the search (2 HTEE, 4 EE)"),
      [] {
        OptionSpec o = integer("search_levels", 1, 4096, nullptr, kRun,
                               "energy-efficient: the levels to try (e.g. 1,5,9; one level: no search)");
        o.type = OptionType::IntegerList;
        return o;
      }(),
      integer("cc", 1, 1024, nullptr, kRun, "static: concurrency, files in flight per chunk"),
      integer("p", 1, 64, nullptr, kRun, "static: parallelism, range streams (TCP connections) per file"),
      integer("pp", 1, 128, nullptr, kRun, "static: pipelining, requests outstanding per connection"),
      integer("cores", 1, 4096, nullptr, kRun, "static: online cores"),
      text("sweep", OptionType::Text, kRun,
           "sweep: points to visit in turn, cc:p:pp[:cores] separated by commas (xfer-hla collect)", 65536),
      integer("sweep_hold", 2, 1000, 3, kRun, "sweep: intervals each point is held (the first settles)"),
      integer("freq_khz", 1, 1e8, nullptr, kRun, "static: CPU frequency (kHz)"),
      // The kernel layer.
      in(choice("kernel_mode", {"auto", "hotplug", "affinity", "off"}, "auto", kGlobal | kRun,
                "kernel layer: auto (hotplug where writable, else affinity), hotplug, affinity, off"),
         "kernel.mode", "--kernel"),
      in(integer("min_cores", 1, 4096, 1, kGlobal | kPolicy | kRun, "never fewer online cores than this"),
         "kernel.min_cores"),
      in(choice("busy_cores", {"kept", "taken"}, "kept", kGlobal | kRun,
                "hotplug: the cores other processes keep busy stay online on top of what the jobs ask for (kept), "
                "or the jobs' ask alone decides (taken)"),
         "kernel.busy_cores", "--busy-cores"),
      in(number("offline_after_s", 0, 3600, 2, kGlobal | kRun,
                "hotplug: a core goes offline only once the jobs' ask for fewer cores has stood this long (s); "
                "meanwhile xferd's threads are confined to the cores that stay (affinity), so a shorter job never "
                "pays for the hotplug. 0: at once"),
         "kernel.offline_after_s", "--offline-after"),
      integer("max_cores", 1, 4096, nullptr, kPolicy, "never more online cores than this"),
      in(integer("min_freq_khz", 0, 1e8, 0, kGlobal | kPolicy, "the lowest CPU frequency (kHz) a job may set; 0: the driver's"),
         "kernel.min_freq_khz"),
      in(integer("max_freq_khz", 0, 1e8, 0, kGlobal | kPolicy, "the highest CPU frequency (kHz) a job may set; 0: the driver's"),
         "kernel.max_freq_khz"),
      in(text("kernel_state", OptionType::Path, kGlobal | kRun,
              "journal of the original cores / frequency, restored at exit and after a crash"),
         "kernel.state_file"),
      // Energy.
      in(text("power_model", OptionType::Path, kGlobal | kRun,
              "power model coefficients (TOML) from xferctl calibrate; the paper's when the file is not there"),
         "energy.power_model", "--model"),
      // The transfer history and what is learnt from it (Cross-LayerHLA).
      in(text("history", OptionType::Text, kGlobal | kRun,
              "transfer history: a SQLite file or a postgresql:// URL (xferd: STATE_DIR/history.db; xferctl run: off)"),
         "history.url", "--history"),
      in(text("history_journal", OptionType::Text, kGlobal | kRun,
              "the local journal (SQLite) of a postgresql:// history, shipped to the server when it answers "
              "(xferd: STATE_DIR/history.db; xferctl: ~/.local/state/xferd/history.db)"),
         "history.journal"),
      number("loss_pct", 0, 100, nullptr, kRun, "the path's packet loss in percent, when known (kept in the history)"),
      in(text("hla_table", OptionType::Text, kGlobal | kRun, "parameter table from xfer-hla analyze (\"\": none)"),
         "hla.table", "--hla-table"),
      choice("energy_scope", {"machine", "process"}, "machine", kRun,
             "power model input: machine (all CPUs) or process (this process's CPU time; for test beds)"),
  };
}

std::string num(double v) { return fmt::format("{}", v); }

// "cc:p:pp[:cores],..." -> points; OptionError naming the bad one.
std::vector<std::array<int, 4>> parse_sweep(const std::string& text) {
  std::vector<std::array<int, 4>> out;
  size_t b = 0;
  while (b <= text.size()) {
    size_t e = text.find(',', b);
    if (e == std::string::npos) e = text.size();
    std::string item = text.substr(b, e - b);
    std::array<int, 4> pt{1, 1, 1, 0};
    const int lo[4] = {1, 1, 1, 1}, hi[4] = {1024, 64, 128, 4096};
    size_t k = 0, q = 0;
    bool ok = !item.empty();
    while (ok && q <= item.size() && k < 4) {
      size_t c = item.find(':', q);
      if (c == std::string::npos) c = item.size();
      std::string part = item.substr(q, c - q);
      char* end = nullptr;
      long v = part.empty() ? -1 : std::strtol(part.c_str(), &end, 10);
      ok = end && *end == 0 && v >= lo[k] && v <= hi[k];
      if (ok) pt[k++] = int(v);
      q = c + 1;
      if (c == item.size()) break;
    }
    if (!ok || k < 3 || q <= item.size())
      throw OptionError("sweep: '" + printable(item) + "' is not cc:p:pp or cc:p:pp:cores (cc 1-1024, p 1-64, pp 1-128)");
    out.push_back(pt);
    b = e + 1;
  }
  return out;
}

std::string join(const std::vector<std::string>& v, const char* sep) { return fmt::format("{}", fmt::join(v, sep)); }

std::vector<std::string> split(const std::string& s, char c) {
  std::vector<std::string> out;
  size_t b = 0;
  for (size_t e; (e = s.find(c, b)) != std::string::npos; b = e + 1) out.push_back(s.substr(b, e - b));
  out.push_back(s.substr(b));
  return out;
}

const char* scope_name(OptionScope s) {
  switch (s) {
    case kGlobal: return "the configuration's sections";
    case kPolicy: return "a policy";
    case kJob: return "a job's options";
    case kRun: return "xferctl run";
  }
  return "?";
}

std::string in_range(const OptionSpec& o, double v) {
  if (!std::isfinite(v)) return o.name + " must be a finite number, not " + num(v);
  if (v < o.lo || v > o.hi) return o.name + " must be between " + num(o.lo) + " and " + num(o.hi) + ", not " + num(v);
  return "";
}

// A JSON number as a double; nullopt when it is not a number.
std::optional<double> as_number(const nlohmann::json& v) {
  if (!v.is_number()) return std::nullopt;
  return v.get<double>();
}

bool names_have(const std::vector<std::string>& v, const std::string& x) { return std::find(v.begin(), v.end(), x) != v.end(); }

// "a", "a / b", "a, b and c"
std::string listed_names(const std::vector<std::string>& v, const char* two) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i)
    out += (i == 0 ? "" : i + 1 < v.size() ? ", " : v.size() == 2 ? two : " and ") + v[i];
  return out;
}

// The entries that take option k, in registry order.
std::vector<std::string> option_takers(const std::string& k) {
  std::vector<std::string> out;
  for (const TunerEntry& e : tuner_registry())
    if (names_have(e.takes, k)) out.push_back(e.name);
  return out;
}

// "" or why the options given (one layer: a table of names and values) do
// not go with the algorithm: an option of another policy's own
// ("target_mbps / target_pct go with the throughput-target and
// hla-throughput algorithms, not min-energy").
std::string tuner_option_problem(const std::string& algorithm, const nlohmann::json& given) {
  const TunerEntry* self = find_tuner(algorithm);
  for (const OptionSpec& o : option_table()) {
    const std::string& k = o.name;
    if (!given.contains(k) || (self && names_have(self->takes, k))) continue;
    std::vector<std::string> by = option_takers(k);
    if (by.empty()) continue;  // an option of every policy
    // Its fellows: the options taken by exactly the same policies.
    std::vector<std::string> group;
    for (const OptionSpec& f : option_table())
      if (option_takers(f.name) == by) group.push_back(f.name);
    std::string note;
    for (const std::string& t : by) {
      const std::string& n = find_tuner(t)->takes_note;
      if (t == by.front()) note = n;
      else if (n != note) note.clear();
    }
    return (note.empty() ? "" : k + " " + note + "; ") + listed_names(group, " / ") + (group.size() == 1 ? " goes" : " go") +
           " with the " + listed_names(by, " and ") + (by.size() == 1 ? " algorithm" : " algorithms") + ", not " + algorithm;
  }
  return "";
}

}  // namespace

std::string OptionSpec::flag_name() const {
  if (!flag.empty()) return flag;
  std::string f = "--" + name;
  std::replace(f.begin(), f.end(), '_', '-');
  return f;
}

const std::vector<OptionSpec>& option_table() {
  static const std::vector<OptionSpec> table = make_table();
  return table;
}

const OptionSpec* find_option(const std::string& name) {
  for (const OptionSpec& o : option_table())
    if (o.name == name) return &o;
  return nullptr;
}

std::string check_option(const OptionSpec& o, const nlohmann::json& v) {
  switch (o.type) {
    case OptionType::Integer: {
      std::optional<double> d = as_number(v);
      if (!d || (v.is_number_float() && std::isfinite(*d) && *d != std::floor(*d)))
        return o.name + " takes an integer, not " + v.dump();
      return in_range(o, *d);
    }
    case OptionType::Number: {
      std::optional<double> d = as_number(v);
      if (!d) return o.name + " takes a number, not " + v.dump();
      return in_range(o, *d);
    }
    case OptionType::IntegerList: {
      if (!v.is_array() || v.empty()) return o.name + " takes a list of integers, not " + v.dump();
      for (const auto& e : v) {
        if (!e.is_number_integer()) return o.name + " takes a list of integers, not " + v.dump();
        if (std::string why = in_range(o, e.get<double>()); !why.empty()) return why;
      }
      return "";
    }
    case OptionType::Choice: {
      if (!v.is_string()) return o.name + " takes one of " + join(o.choices, ", ") + ", not " + v.dump();
      const std::string& s = v.get_ref<const std::string&>();
      if (std::find(o.choices.begin(), o.choices.end(), s) == o.choices.end())
        return o.name + ": '" + printable(s) + "' is not one of " + join(o.choices, ", ");
      return "";
    }
    case OptionType::Text:
    case OptionType::Path: {
      if (!v.is_string()) return o.name + " takes a string, not " + v.dump();
      const std::string& s = v.get_ref<const std::string&>();
      if (s.size() > o.max_bytes) return o.name + ": at most " + std::to_string(o.max_bytes) + " bytes";
      if (o.type == OptionType::Path && s.empty()) return o.name + ": an empty path";
      if (s.find('\0') != std::string::npos) return o.name + ": a NUL byte";
      return "";
    }
  }
  return "";
}

nlohmann::json option_from_text(const OptionSpec& o, const std::string& text, std::string* why) {
  nlohmann::json v;
  auto parse_int = [&](const std::string& t, nlohmann::json* out) {
    char* end = nullptr;
    errno = 0;
    long long x = std::strtoll(t.c_str(), &end, 10);
    if (t.empty() || *end || errno) return false;
    *out = int64_t(x);
    return true;
  };
  switch (o.type) {
    case OptionType::Integer:
      if (!parse_int(text, &v)) {
        *why = o.name + " takes an integer, not '" + printable(text) + "'";
        return nullptr;
      }
      break;
    case OptionType::Number: {
      char* end = nullptr;
      double d = std::strtod(text.c_str(), &end);
      if (text.empty() || *end) {
        *why = o.name + " takes a number, not '" + printable(text) + "'";
        return nullptr;
      }
      v = d;
      break;
    }
    case OptionType::IntegerList: {
      v = nlohmann::json::array();
      for (const std::string& part : split(text, ',')) {
        nlohmann::json e;
        if (!parse_int(part, &e)) {
          *why = o.name + " takes a list of integers, not '" + printable(text) + "'";
          return nullptr;
        }
        v.push_back(e);
      }
      break;
    }
    default:
      v = text;
  }
  *why = check_option(o, v);
  return why->empty() ? v : nlohmann::json();
}

std::string check_layer(const OptionValues& v, OptionScope scope, const std::string& algorithm) {
  if (!v.is_object()) return "options must be a table of names and values";
  for (const auto& [name, value] : v.items()) {
    const OptionSpec* o = find_option(name);
    if (!o || !(o->scopes & scope)) {
      std::vector<std::string> known;
      for (const OptionSpec& s : option_table())
        if (s.scopes & scope) known.push_back(s.name);
      if (o) return name + " cannot be set in " + scope_name(scope) + " (there: " + join(known, ", ") + ")";
      return "unknown option '" + printable(name) + "' (known in " + scope_name(scope) + ": " + join(known, ", ") + ")";
    }
    if (std::string why = check_option(*o, value); !why.empty()) return why;
  }
  if (v.contains("target_mbps") && v.contains("target_pct")) return "give target_mbps or target_pct, not both";
  if (!algorithm.empty())
    if (std::string why = tuner_option_problem(algorithm, v); !why.empty()) return why;
  auto n = [&](const char* k) { return v.contains(k) ? v[k].get<double>() : 0.0; };
  if (n("max_cores") > 0 && n("min_cores") > n("max_cores")) return "min_cores is above max_cores";
  if (n("max_freq_khz") > 0 && n("min_freq_khz") > n("max_freq_khz")) return "min_freq_khz is above max_freq_khz";
  return "";
}

CoreControl::Mode core_mode(const std::string& kernel) {
  if (kernel == "hotplug") return CoreControl::Mode::Hotplug;
  if (kernel == "affinity") return CoreControl::Mode::Affinity;
  bool can = access("/sys/devices/system/cpu/cpu1/online", W_OK) == 0;
  if (!can) log::info("kernel layer: cpu hotplug not writable here; cores by affinity (this process's threads only)");
  return can ? CoreControl::Mode::Hotplug : CoreControl::Mode::Affinity;
}

ResolvedOptions setup_job(const std::string& algorithm, const OptionLayers& layers) {
  for (auto [layer, scope] : {std::pair{&layers.global, kGlobal}, std::pair{&layers.policy, kPolicy},
                              std::pair{&layers.job, layers.job_scope}})
    if (std::string why = check_layer(*layer, scope, scope == kGlobal ? "" : algorithm); !why.empty())
      throw OptionError(why);
  ResolvedOptions s;
  OptionValues& m = s.values;
  m = OptionValues::object();
  for (const OptionSpec& o : option_table())
    if (!o.def.is_null()) m[o.name] = o.def;
  m.update(layers.defaults);
  m.update(layers.global);
  for (const OptionValues* layer : {&layers.policy, &layers.job}) {
    // A target replaces the one below it, whichever kind it is.
    if (layer->contains("target_mbps")) m.erase("target_pct");
    if (layer->contains("target_pct")) m.erase("target_mbps");
    for (const auto& [k, v] : layer->items()) {
      // Kernel ranges of a policy lie within the global ones; a job's
      // channel limit only lowers its policy's.
      if (k == "min_cores" || k == "min_freq_khz") m[k] = std::max(m.value(k, 0.0), v.get<double>());
      else if (k == "max_freq_khz" && m.value(k, 0.0) > 0 && v.get<double>() > 0)
        m[k] = std::min(m[k].get<double>(), v.get<double>());
      else if (k == "max_channels" && layer == &layers.job) m[k] = std::min(m[k].get<double>(), v.get<double>());
      else if (k == "class" && layer == &layers.job &&
               *job_class_from(v.get<std::string>()) > *job_class_from(m[k].get<std::string>()))
        throw OptionError("class " + v.get<std::string>() + " is above the policy's (" + m[k].get<std::string>() +
                          "); a job may only lower its class");
      else m[k] = v;
    }
  }
  if (std::string why = tuner_needs_problem(algorithm, m); !why.empty())
    throw OptionError("the " + algorithm + " algorithm " + why);
  if (m.value("max_cores", 0.0) > 0 && m["min_cores"].get<double>() > m["max_cores"].get<double>())
    throw OptionError("min_cores is above max_cores");
  if (m["max_freq_khz"].get<double>() > 0 && m["min_freq_khz"].get<double>() > m["max_freq_khz"].get<double>())
    throw OptionError("min_freq_khz is above max_freq_khz");

  auto i = [&](const char* k, long long d = 0) { return m.contains(k) ? m[k].get<long long>() : d; };
  auto d = [&](const char* k, double def = 0) { return m.contains(k) ? m[k].get<double>() : def; };
  EngineOptions& e = s.engine;
  e.http = m["http"].get<std::string>();
  e.interval_ms = long(i("interval_ms"));
  e.sync_ms = long(i("sync_ms"));
  e.wake_batch_ms = long(i("wake_batch_ms"));
  e.direct_io = m["direct_io"].get<std::string>() == "on";
  e.unvalidated_resume = m["unvalidated_resume"].get<std::string>() == "trust";
  e.bandwidth_mbps = d("bandwidth_mbps");
  e.bandwidth_configured = layers.global_bandwidth_configured || layers.policy.contains("bandwidth_mbps") ||
                           layers.job.contains("bandwidth_mbps");
  e.rtt_ms = d("rtt_ms");
  e.loss_pct = d("loss_pct", -1);
  e.max_channels = int(i("max_channels"));
  e.max_file_bytes = uint64_t(i("max_file_bytes"));
  s.cls = *job_class_from(m["class"].get<std::string>());
  s.weight = d("weight", 1);
  s.queue_unfit = m["admission"] == "queue";
  TunerOptions& t = s.tuner;
  if (algorithm == "static") {
    t.fixed = ChunkParams{int(i("cc", 1)), int(i("p", 1)), int(i("pp", 1))};
    // What the first params open at once, over HTTP/1.1 (EngineOptions::preconnect).
    e.preconnect = std::max(1, std::min(t.fixed->cc, e.max_channels) * std::max(1, t.fixed->p));
  }
  t.fixed_cores = int(i("cores"));
  t.fixed_freq_khz = long(i("freq_khz"));
  t.target_mbps = d("target_mbps");
  t.target_pct = d("target_pct");
  t.energy_budget_j_per_gb = d("energy_budget_j_per_gb");
  t.stream_cost = d("stream_cost");
  t.explore_share = d("explore_share", 0.1);
  t.search_step = int(i("search_step"));
  if (m.contains("search_levels")) t.search_levels = m["search_levels"].get<std::vector<int>>();
  if (m.contains("sweep")) t.sweep_points = parse_sweep(m["sweep"].get<std::string>());
  t.sweep_hold = int(i("sweep_hold", 3));
  s.kernel = m["kernel_mode"] != "off";
  t.kernel = s.kernel;
  KernelLayer::Config& k = s.kernel_config;
  if (s.kernel) k.mode = core_mode(m["kernel_mode"].get<std::string>());
  k.min_cores = int(i("min_cores", 1));
  k.spare_busy = !m.contains("busy_cores") || m["busy_cores"] != "taken";
  k.offline_after_s = d("offline_after_s", 2);
  k.max_cores = int(i("max_cores"));
  k.min_freq_khz = long(i("min_freq_khz"));
  k.max_freq_khz = long(i("max_freq_khz"));
  if (m.contains("kernel_state")) k.state_file = m["kernel_state"].get<std::string>();
  return s;
}

}  // namespace xfer
