// xferd's configuration: /etc/xferd/xferd.conf, then every
// /etc/xferd/xferd.conf.d/*.conf in name order (TOML; a later file overrides
// the keys it sets). One table of keys (config.cpp) says what each key is;
// the shipped systemd/xferd.conf comments every one of them.
#pragma once

#include <sys/socket.h>
#include <sys/types.h>

#include <cstdint>
#include <map>
#include <stdexcept>
#include <set>
#include <string>
#include <vector>

#include "paths.h"
#include "xfer/options.h"

namespace xferd {

// A named SLA policy, chosen by callers by name.
struct Policy {
  std::string name;
  std::string algorithm;   // a tuner of the registry: min-energy, max-throughput, ...
  std::string description;
  bool kernel = false;     // may change online cores and CPU frequency
  std::vector<std::string> users;   // who may use it (names or uids); empty with
  std::vector<std::string> groups;  // groups empty: everyone (kernel rules still apply)
  // The job options the policy sets (xfer::option_table(), scope kPolicy):
  // target_mbps / target_pct, max_channels, search_step, min_cores,
  // max_cores, min_freq_khz, max_freq_khz, ca_file.
  xfer::OptionValues values = xfer::OptionValues::object();
  std::string origin;               // "file:line" where it was defined
  // The admin's credentials for the policy's jobs, each secret named by a
  // systemd credential (LoadCredential=NAME:PATH in xferd.service; read from
  // $CREDENTIALS_DIRECTORY/NAME when a job starts, never kept in the config):
  // a proxy (with a user and password), and a bearer token, or a user and
  // password, for one origin. A job's own credentials for that origin win.
  std::string proxy, proxy_user, proxy_password_credential, no_proxy;
  std::string credentials_origin, user, password_credential, bearer_token_credential;
  bool has_credentials() const {
    return !proxy.empty() || !password_credential.empty() || !bearer_token_credential.empty();
  }
};

struct Config {
  // [daemon]
  std::string state_dir = kStateDir;
  double keep_finished_days = 7;    // finished jobs' summaries are kept this long
  std::string default_policy = "min-energy";
  std::string default_policy_unprivileged = "app-min-energy";
  std::string log_level = "info";
  // [limits]
  int max_jobs_per_user = 32;       // jobs not yet finished, per uid
  int max_entries_per_job = 100000;
  int max_entries_per_user = 200000;  // over the user's unfinished jobs
  int max_running_jobs = 16;        // more wait, queued
  int max_running_entries = 400000; // over the running jobs: bounds memory (a larger job runs alone)
  int max_finished_per_user = 100;  // finished jobs kept per user; older ones are forgotten
  int max_secret_kib_per_user = 4096;  // the secrets one user's unfinished jobs hold (locked memory)
  double max_floor_mbps_per_user = 0;  // throughput floors over one user's unfinished jobs; 0: no limit
  // [metrics]: where the metrics for Prometheus go (metrics_server.h); empty: nowhere
  std::string metrics_listen;            // "127.0.0.1:9807"
  std::string metrics_textfile;          // for node_exporter's textfile collector
  double metrics_textfile_interval_s = 15;
  // [kernel]
  std::string kernel_group = "xferd-kernel";  // non-root members may use kernel policies
  // Every job option the sections set (xfer::option_table(), scope kGlobal,
  // under its "section.key"): interval_ms, max_file_bytes, max_channels,
  // the kernel layer's mode, cores, frequency range and journal, the power
  // model, bandwidth_mbps, http, flows. Holds every such option: the
  // table's default, the daemon's paths, then what the files say.
  xfer::OptionValues values = xfer::OptionValues::object();
  // Those of them a file set (the others hold the table's defaults).
  std::set<std::string> from_files;
  bool configured(const std::string& name) const { return from_files.count(name) > 0; }
  // One of them, as a string (a Choice or Path).
  // A text option's value; "" when it has no value (no default, not set).
  std::string text(const char* name) const {
    auto it = values.find(name);
    return it == values.end() || it->is_null() ? std::string() : it->get<std::string>();
  }

  // The built-in set until a file defines a [policy.NAME]; from then on only
  // the policies the files define.
  std::map<std::string, Policy> policies;
  bool policies_from_files = false;
  std::vector<std::string> files;   // the files this was read from, in order
};

// "HOST:PORT" (an IPv4 address, or an IPv6 one in brackets) into *out;
// "" or why it is not one. Host names are refused: a metrics port binds to
// an address the admin chose, not to what a resolver says today.
std::string parse_listen_address(const std::string& s, sockaddr_storage* out, socklen_t* len);

// "FILE:LINE: reason" (or "FILE: reason"), one problem.
class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Every key the files may set: "section.key", and the keys of a [policy.NAME].
std::vector<std::string> config_keys();
std::vector<std::string> policy_keys_known();

// The built-in defaults: what xferd uses with no config file at all.
Config builtin_config();
// Defaults, then main (when it exists), then dropin_dir/*.conf. Throws
// ConfigError at the first problem.
Config load_config(const std::string& main, const std::string& dropin_dir);
// One file's text applied on top of c ("file" names it in messages); throws
// ConfigError. What load_config does per file; check_config() then checks the
// whole.
void apply_config_text(const std::string& text, const std::string& file, Config& c);
void check_config(const Config& c);

}  // namespace xferd
