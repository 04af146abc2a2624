// xferd's configuration: /etc/xferd/xferd.conf, then every
// /etc/xferd/xferd.conf.d/*.conf in name order (TOML; a later file overrides
// the keys it sets). One table of keys (config.cpp) says what each key is;
// the shipped systemd/xferd.conf comments every one of them.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "xfer/energy.h"
#include "xfer/kernel.h"

namespace xferd {

// A named SLA policy, chosen by callers by name.
struct Policy {
  std::string name;
  std::string algorithm;   // a tuner of the registry: min-energy, max-throughput, ...
  std::string description;
  double target_mbps = 0;  // throughput-target
  double target_pct = 0;   // throughput-target: percent of the measured maximum
  int max_channels = 0;    // 0: the global limit
  int search_step = 0;     // energy-efficient (0: the algorithm's own)
  bool kernel = false;     // may change online cores and CPU frequency
  int min_cores = 0, max_cores = 0;          // 0: the global / all
  long min_freq_khz = 0, max_freq_khz = 0;   // 0: the driver's range
  std::vector<std::string> users;   // who may use it (names or uids); empty with
  std::vector<std::string> groups;  // groups empty: everyone (kernel rules still apply)
  std::string ca_file;              // PEM CA bundle for https instead of the system's ("" : system)
  std::string origin;               // "file:line" where it was defined
};

struct Config {
  // [daemon]
  long interval_ms = 5000;          // control interval
  std::string state_dir = "/var/lib/xferd";
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
  int64_t max_file_bytes = 0;       // a file larger than this fails (0: no limit)
  int max_channels = 32;
  // [kernel]
  std::string kernel_mode = "auto";  // auto | hotplug | affinity | off
  int min_cores = 1;
  long min_freq_khz = 0, max_freq_khz = 0;  // the range any policy may use (0: the driver's)
  std::string kernel_group = "xferd-kernel";  // non-root members may use kernel policies
  std::string kernel_state = xfer::KernelJournal::kDefaultPath;
  // [energy]
  // The power model's coefficients where there is no RAPL (`xferctl
  // calibrate` writes them); the paper's defaults when no file is there.
  std::string power_model = xfer::kDefaultPowerModelPath;
  // [network]
  double bandwidth_mbps = 1000;     // link rate for the BDP
  std::string http = "auto";
  std::string flows = "ebpf";       // ebpf | tcp_info | off

  // The built-in set until a file defines a [policy.NAME]; from then on only
  // the policies the files define.
  std::map<std::string, Policy> policies;
  bool policies_from_files = false;
  std::vector<std::string> files;   // the files this was read from, in order
};

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
