#include "config.h"
#include "xfer/manifest.h"

#include "xfer/bw_schedule.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstring>

#include <algorithm>
#include <limits>
#include <functional>
#include <toml++/toml.h>

#include "xfer/nesting.h"
#include "xfer/text.h"
#include "xfer/safe_open.h"
#include "xfer/energy.h"
#include "xfer/tuner.h"

namespace xferd {

namespace {

constexpr size_t kMaxConfigBytes = 1 << 20;

// A key's setter returns "" or what is wrong with the value.
template <class T>
using Setter = std::function<std::string(const toml::node&, T&)>;

template <class T, class M>
Setter<T> integer(M T::*field, long lo, long hi) {
  return [=](const toml::node& n, T& t) -> std::string {
    auto v = n.value<int64_t>();
    if (!n.is_integer() || !v) return "expected an integer";
    if (*v < lo || *v > hi) return "must be between " + std::to_string(lo) + " and " + std::to_string(hi);
    t.*field = static_cast<M>(*v);
    return "";
  };
}

template <class T>
Setter<T> number(double T::*field, double lo, double hi) {
  return [=](const toml::node& n, T& t) -> std::string {
    auto v = n.value<double>();
    if (!(n.is_integer() || n.is_floating_point()) || !v) return "expected a number";
    if (!std::isfinite(*v)) return "expected a finite number, not " + std::to_string(*v);
    if (*v < lo || *v > hi) return "must be between " + std::to_string(lo) + " and " + std::to_string(hi);
    t.*field = *v;
    return "";
  };
}

template <class T>
Setter<T> text(std::string T::*field, std::vector<std::string> choices = {}) {
  return [=](const toml::node& n, T& t) -> std::string {
    if (!n.is_string()) return "expected a string";
    std::string v = *n.value<std::string>();
    if (!choices.empty() && std::find(choices.begin(), choices.end(), v) == choices.end()) {
      std::string all;
      for (const auto& c : choices) all += (all.empty() ? "" : ", ") + c;
      return "'" + v + "' is not one of " + all;
    }
    t.*field = v;
    return "";
  };
}

// A string that `why` accepts (returns "") or refuses (returns the reason).
template <class T>
Setter<T> checked(std::string T::*field, std::function<std::string(const std::string&)> why) {
  return [=](const toml::node& n, T& t) -> std::string {
    if (!n.is_string()) return "expected a string";
    std::string v = *n.value<std::string>();
    if (std::string bad = why(v); !bad.empty()) return bad;
    t.*field = v;
    return "";
  };
}

template <class T>
Setter<T> boolean(bool T::*field) {
  return [=](const toml::node& n, T& t) -> std::string {
    if (!n.is_boolean()) return "expected true or false";
    t.*field = *n.value<bool>();
    return "";
  };
}

template <class T>
Setter<T> strings(std::vector<std::string> T::*field) {
  return [=](const toml::node& n, T& t) -> std::string {
    const toml::array* a = n.as_array();
    if (!a) return "expected an array of strings";
    std::vector<std::string> out;
    for (const auto& e : *a) {
      if (e.is_string()) out.push_back(*e.value<std::string>());
      else if (e.is_integer()) out.push_back(std::to_string(*e.value<int64_t>()));  // a uid / gid
      else return "expected an array of strings (names) or integers (ids)";
    }
    t.*field = out;
    return "";
  };
}

// The daemon's own keys: section, key, setter. The job options a section or
// a policy may set come from xfer::option_table() (table_option below); a
// section listed here with no keys of its own holds table options only.
// systemd/xferd.conf documents each.
const std::map<std::string, std::map<std::string, Setter<Config>>>& global_keys() {
  static const std::map<std::string, std::map<std::string, Setter<Config>>> keys = {
      {"daemon",
       {{"state_dir", text(&Config::state_dir)},
        {"keep_finished_days", number(&Config::keep_finished_days, 0, 36500)},
        {"default_policy", text(&Config::default_policy)},
        {"default_policy_unprivileged", text(&Config::default_policy_unprivileged)},
        {"log_level", text(&Config::log_level, {"debug", "info", "warn", "error"})}}},
      {"limits",
       {{"max_jobs_per_user", integer(&Config::max_jobs_per_user, 1, 100000)},
        {"max_entries_per_job", integer(&Config::max_entries_per_job, 1, 10000000)},
        {"max_entries_per_user", integer(&Config::max_entries_per_user, 1, 100000000)},
        {"max_running_jobs", integer(&Config::max_running_jobs, 1, 10000)},
        {"max_running_entries", integer(&Config::max_running_entries, 1, 100000000)},
        {"max_finished_per_user", integer(&Config::max_finished_per_user, 0, 1000000)},
        {"max_secret_kib_per_user", integer(&Config::max_secret_kib_per_user, 4, 1 << 22)},
        {"max_floor_mbps_per_user", number(&Config::max_floor_mbps_per_user, 0, 1e7)}}},
      {"kernel", {{"group", text(&Config::kernel_group)}}},
      {"metrics",
       {{"listen", checked(&Config::metrics_listen,
                           [](const std::string& v) {
                             sockaddr_storage sa;
                             socklen_t len = 0;
                             return v.empty() ? std::string() : parse_listen_address(v, &sa, &len);
                           })},
        {"textfile", checked(&Config::metrics_textfile,
                             [](const std::string& v) {
                               return v.empty() || (v[0] == '/' && v.back() != '/')
                                          ? std::string()
                                          : std::string("expected an absolute path to a file");
                             })},
        {"textfile_interval_s", number(&Config::metrics_textfile_interval_s, 1, 3600)}}},
      {"energy", {}},
      {"network", {}},
      {"history", {}},
      {"hla", {}},
  };
  return keys;
}

// An http(s) URL without user information (credentials are named apart).
Setter<Policy> url_text(std::string Policy::*field) { return checked(field, xfer::check_url); }

// The name of a systemd credential: a file name in $CREDENTIALS_DIRECTORY.
Setter<Policy> credential_name(std::string Policy::*field) {
  return checked(field, [](const std::string& v) {
    if (v.empty() || v == "." || v == ".." || v.find('/') != std::string::npos || v.size() > 255)
      return std::string("the name of a systemd credential (LoadCredential=NAME:PATH), a plain file name");
    return std::string();
  });
}

std::vector<std::string> algorithms() {
  std::vector<std::string> out;
  for (const auto& e : xfer::tuner_registry()) out.push_back(e.name);
  return out;
}

const std::map<std::string, Setter<Policy>>& policy_keys() {
  static const std::map<std::string, Setter<Policy>> keys = {
      {"algorithm", text(&Policy::algorithm, algorithms())},
      {"description", text(&Policy::description)},
      {"kernel", boolean(&Policy::kernel)},
      {"users", strings(&Policy::users)},
      {"groups", strings(&Policy::groups)},
      {"proxy", url_text(&Policy::proxy)},
      {"proxy_user", text(&Policy::proxy_user)},
      {"proxy_password_credential", credential_name(&Policy::proxy_password_credential)},
      {"no_proxy", text(&Policy::no_proxy)},
      {"credentials_origin", url_text(&Policy::credentials_origin)},
      {"user", text(&Policy::user)},
      {"password_credential", credential_name(&Policy::password_credential)},
      {"bearer_token_credential", credential_name(&Policy::bearer_token_credential)},
  };
  return keys;
}

// The table's option a key names: in [section] by its global_key, in a
// policy by its name.
const xfer::OptionSpec* table_option(const std::string& section, const std::string& key) {
  for (const xfer::OptionSpec& o : xfer::option_table()) {
    if (section == "policy" ? (o.scopes & xfer::kPolicy) && o.name == key : o.global_key == section + "." + key)
      return &o;
  }
  return nullptr;
}

// A TOML value as the table's JSON.
nlohmann::json to_json(const toml::node& n) {
  if (auto v = n.value_exact<int64_t>()) return *v;
  if (n.is_floating_point()) return *n.value<double>();
  if (n.is_string()) return *n.value<std::string>();
  if (n.is_boolean()) return *n.value<bool>();
  if (const toml::array* a = n.as_array()) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& e : *a) out.push_back(to_json(e));
    return out;
  }
  return "(a table)";
}

std::string at(const std::string& file, const toml::source_region& r) {
  return r.begin.line ? file + ":" + std::to_string(r.begin.line) : file;
}

template <class T>
void apply_table(const std::string& file, const std::string& where, const std::string& section, const toml::table& tbl,
                 const std::map<std::string, Setter<T>>& keys, T& target, xfer::OptionValues& values) {
  for (auto&& [k, v] : tbl) {
    std::string key(k.str());
    auto it = keys.find(key);
    if (it != keys.end()) {
      if (std::string why = it->second(v, target); !why.empty())
        throw ConfigError(at(file, v.source()) + ": [" + where + "] " + key + ": " + why);
      continue;
    }
    if (const xfer::OptionSpec* o = table_option(section, key)) {
      nlohmann::json value = to_json(v);
      // The table's words, as xferctl and D-Bus say them.
      if (std::string why = xfer::check_option(*o, value); !why.empty())
        throw ConfigError(at(file, v.source()) + ": [" + where + "] " + why);
      values[o->name] = value;
      if constexpr (std::is_same_v<T, Config>) target.from_files.insert(o->name);
      continue;
    }
    std::vector<std::string> known;
    for (const auto& [name, _] : keys) known.push_back(name);
    for (const xfer::OptionSpec& o : xfer::option_table()) {
      if (section == "policy" && (o.scopes & xfer::kPolicy)) known.push_back(o.name);
      if (section != "policy" && o.global_key.rfind(section + ".", 0) == 0) known.push_back(o.global_key.substr(section.size() + 1));
    }
    std::sort(known.begin(), known.end());
    std::string list;
    for (const auto& n : known) list += (list.empty() ? "" : ", ") + n;
    throw ConfigError(at(file, k.source()) + ": unknown key '" + key + "' in [" + where + "] (known: " + list + ")");
  }
}

std::string read_config_file(const std::string& file) {
  try {
    return xfer::read_trusted_file(file, kMaxConfigBytes, "configuration file");
  } catch (const std::runtime_error& e) {
    throw ConfigError(e.what());
  }
}

}  // namespace

void apply_config_text(const std::string& text, const std::string& file, Config& c) {
  toml::table root;
  try {
    xfer::check_toml_nesting(text, file);
    root = toml::parse(text, file);
  } catch (const xfer::NestingError& e) {
    throw ConfigError(e.what());
  } catch (const toml::parse_error& e) {
    throw ConfigError(at(file, e.source()) + ": " + std::string(e.description()));
  }
  for (auto&& [k, v] : root) {
    std::string section(k.str());
    const toml::table* tbl = v.as_table();
    if (!tbl) throw ConfigError(at(file, k.source()) + ": '" + section + "' must be a [section]");
    if (section == "policy") {
      for (auto&& [pk, pv] : *tbl) {
        std::string name(pk.str());
        const toml::table* ptbl = pv.as_table();
        if (!ptbl) throw ConfigError(at(file, pk.source()) + ": policy." + name + " must be a table [policy." + name + "]");
        if (name.empty() || name.size() > 64 ||
            name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-_") != std::string::npos)
          throw ConfigError(at(file, pk.source()) + ": policy name '" + name +
                            "' must be 1 to 64 of a-z, 0-9, '-' and '_'");
        if (!c.policies_from_files) {  // the first file that defines policies replaces the built-in set
          c.policies.clear();
          c.policies_from_files = true;
        }
        Policy& p = c.policies[name];
        p.name = name;
        p.origin = at(file, pk.source());
        apply_table(file, "policy." + name, "policy", *ptbl, policy_keys(), p, p.values);
      }
      continue;
    }
    auto sect = global_keys().find(section);
    if (sect == global_keys().end())
      throw ConfigError(at(file, k.source()) + ": unknown section [" + section +
                        "] (known: daemon, limits, kernel, energy, network, history, hla, policy.NAME)");
    apply_table(file, section, section, *tbl, sect->second, c, c.values);
  }
  c.files.push_back(file);
}

namespace {

void apply_file(const std::string& file, Config& c) { apply_config_text(read_config_file(file), file, c); }

}  // namespace

// What holds across keys and files, checked once everything is read.
void check_config(const Config& c) {
  if (std::string s = c.text("bandwidth_schedule"); !s.empty()) {
    try {
      xfer::BandwidthSchedule::parse(s);
    } catch (const std::invalid_argument& e) {
      throw ConfigError((c.files.empty() ? "built-in defaults" : c.files.back()) + ": [network] schedule: " + e.what());
    }
  }
  // A NUL would cut a path where the daemon hands it to the kernel: the
  // file checked here would not be the one used.
  auto no_nul = [](const xfer::OptionValues& values, const std::string& where) {
    for (const auto& [k, v] : values.items())
      if (v.is_string() && v.get_ref<const std::string&>().find('\0') != std::string::npos)
        throw ConfigError(where + ": '" + k + "' holds a NUL byte");
  };
  no_nul(c.values, c.files.empty() ? "built-in defaults" : c.files.back());
  for (const std::string* t : {&c.state_dir, &c.default_policy, &c.default_policy_unprivileged, &c.kernel_group})
    if (t->find('\0') != std::string::npos)
      throw ConfigError((c.files.empty() ? "built-in defaults" : c.files.back()) + ": a value holds a NUL byte");
  for (const auto& [name, p] : c.policies) {
    no_nul(p.values, p.origin + ": policy " + name);
    if (p.algorithm.empty()) throw ConfigError(p.origin + ": policy " + name + " has no algorithm");
    if ((!p.bearer_token_credential.empty() || !p.password_credential.empty()) && p.credentials_origin.empty())
      throw ConfigError(p.origin + ": policy " + name + ": credentials_origin says which origin its credentials are for");
    if (!p.bearer_token_credential.empty() && !p.password_credential.empty())
      throw ConfigError(p.origin + ": policy " + name + ": a bearer token or a password, not both");
    if (!p.password_credential.empty() && p.user.empty())
      throw ConfigError(p.origin + ": policy " + name + ": password_credential needs user");
    if ((!p.proxy_user.empty() || !p.proxy_password_credential.empty()) && p.proxy.empty())
      throw ConfigError(p.origin + ": policy " + name + ": proxy_user and proxy_password_credential need proxy");
    const xfer::TunerEntry* t = xfer::find_tuner(p.algorithm);  // the key's choices are the registry's
    if (t && !t->run_only.empty())
      throw ConfigError(p.origin + ": policy " + name + ": '" + p.algorithm + "' " + t->run_only + "; it is for xferctl run");
    if (std::string why = xfer::check_layer(p.values, xfer::kPolicy, p.algorithm); !why.empty())
      throw ConfigError(p.origin + ": policy " + name + ": " + why);
    if (std::string why = xfer::tuner_needs_problem(p.algorithm, p.values); !why.empty())
      throw ConfigError(p.origin + ": policy " + name + ": " + p.algorithm + " " + why);
  }
  std::string where = c.files.empty() ? "built-in defaults" : c.files.back();
  if (std::string why = xfer::check_layer(c.values, xfer::kGlobal); !why.empty())
    throw ConfigError(where + ": " + why);
  try {
    xfer::load_power_model(c.text("power_model"));
  } catch (const std::exception& e) {
    throw ConfigError(where + ": [energy] power_model: " + e.what());
  }
  if (!c.policies.count(c.default_policy))
    throw ConfigError(where + ": default_policy '" + c.default_policy + "' is not a defined policy");
  auto u = c.policies.find(c.default_policy_unprivileged);
  if (u == c.policies.end())
    throw ConfigError(where + ": default_policy_unprivileged '" + c.default_policy_unprivileged +
                      "' is not a defined policy");
  if (u->second.kernel)
    throw ConfigError(where + ": default_policy_unprivileged '" + u->first +
                      "' changes the kernel layer; it must be a policy every caller may use");
}

namespace {

Policy builtin(const std::string& name, const std::string& algo, bool kernel, const std::string& what) {
  Policy p;
  p.name = name;
  p.algorithm = algo;
  p.kernel = kernel;
  p.description = what;
  p.origin = "built-in";
  return p;
}

}  // namespace

std::vector<std::string> config_keys() {
  std::vector<std::string> out;
  for (const auto& [section, keys] : global_keys())
    for (const auto& [key, _] : keys) out.push_back(section + "." + key);
  for (const xfer::OptionSpec& o : xfer::option_table())
    if (!o.global_key.empty()) out.push_back(o.global_key);
  return out;
}

std::vector<std::string> policy_keys_known() {
  std::vector<std::string> out;
  for (const auto& [key, _] : policy_keys()) out.push_back(key);
  for (const xfer::OptionSpec& o : xfer::option_table())
    if (o.scopes & xfer::kPolicy) out.push_back(o.name);
  return out;
}

Config builtin_config() {
  Config c;
  for (const xfer::OptionSpec& o : xfer::option_table())
    if ((o.scopes & xfer::kGlobal) && !o.def.is_null()) c.values[o.name] = o.def;
  c.values["kernel_state"] = kKernelState;
  c.values["power_model"] = kPowerModel;
  c.values["history"] = "";          // STATE_DIR/history.db
  c.values["history_journal"] = "";  // STATE_DIR/history.db
  c.values["hla_table"] = "";        // none
  c.policies["min-energy"] = builtin("min-energy", "min-energy", true, "least energy (MinE), cores and frequency stepped down while joules per byte fall");
  c.policies["max-throughput"] = builtin("max-throughput", "max-throughput", true, "most throughput (MaxThr), every core at the top frequency");
  c.policies["energy-efficient"] = builtin("energy-efficient", "energy-efficient", true, "best throughput per joule (HTEE/EE search)");
  c.policies["throughput-target"] = builtin("throughput-target", "throughput-target", true, "70% of the measured maximum at least energy (SLAEE)");
  c.policies["throughput-target"].values["target_pct"] = 70;
  c.policies["hla-throughput"] = builtin("hla-throughput", "hla-throughput", true, "most throughput from the learned parameter table (Cross-LayerHLA Alg. 2)");
  c.policies["hla-energy"] = builtin("hla-energy", "hla-energy", true, "least energy from the learned parameter table (Cross-LayerHLA Alg. 1)");
  c.policies["app-min-energy"] = builtin("app-min-energy", "min-energy", false, "least energy, application layer only");
  c.policies["app-max-throughput"] = builtin("app-max-throughput", "max-throughput", false, "most throughput, application layer only");
  c.policies["app-energy-efficient"] = builtin("app-energy-efficient", "energy-efficient", false, "best throughput per joule, application layer only");
  return c;
}

Config load_config(const std::string& main, const std::string& dropin_dir) {
  Config c = builtin_config();
  struct stat st;
  if (stat(main.c_str(), &st) == 0) apply_file(main, c);  // a directory or FIFO there is refused by the reader
  else if (errno != ENOENT) throw ConfigError(main + ": cannot read: " + std::string(strerror(errno)));
  std::vector<std::string> dropins;
  if (DIR* d = opendir(dropin_dir.c_str())) {
    while (dirent* e = readdir(d)) {
      std::string n = e->d_name;
      if (n.size() > 5 && n.compare(n.size() - 5, 5, ".conf") == 0) dropins.push_back(dropin_dir + "/" + n);
    }
    closedir(d);
  }
  std::sort(dropins.begin(), dropins.end());
  for (const auto& f : dropins) apply_file(f, c);
  check_config(c);
  return c;
}

std::string parse_listen_address(const std::string& s, sockaddr_storage* out, socklen_t* len) {
  std::memset(out, 0, sizeof *out);
  std::string host, port;
  if (!s.empty() && s[0] == '[') {
    size_t close = s.find(']');
    if (close == std::string::npos || close + 1 >= s.size() || s[close + 1] != ':')
      return "expected [IPV6]:PORT, as [::1]:9807";
    host = s.substr(1, close - 1), port = s.substr(close + 2);
  } else {
    size_t colon = s.rfind(':');
    if (colon == std::string::npos) return "expected HOST:PORT, as 127.0.0.1:9807";
    host = s.substr(0, colon), port = s.substr(colon + 1);
    if (host.find(':') != std::string::npos) return "an IPv6 address goes in brackets: [ADDRESS]:PORT";
  }
  if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos ||
      std::stoul(port) == 0 || std::stoul(port) > 65535)
    return "port '" + xfer::printable(port) + "' is not a number from 1 to 65535";
  auto p = uint16_t(std::stoul(port));
  auto* v4 = reinterpret_cast<sockaddr_in*>(out);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(out);
  if (inet_pton(AF_INET, host.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET, v4->sin_port = htons(p), *len = sizeof *v4;
    return "";
  }
  if (inet_pton(AF_INET6, host.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6, v6->sin6_port = htons(p), *len = sizeof *v6;
    return "";
  }
  return "'" + xfer::printable(host) + "' is not an IP address (an IPv6 one goes in brackets)";
}

}  // namespace xferd
