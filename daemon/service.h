// The daemon's one context (the shape of systemd's timedated): the
// configuration, the job store, every job the daemon knows, and the shared
// pieces a running job borrows (flow monitor, kernel layer). bus.cpp puts it
// on D-Bus; this file knows nothing of D-Bus beyond the error names.
#pragma once

#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>

#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "caller.h"
#include "config.h"
#include "store.h"
#include "xfer/energy.h"
#include "xfer/engine.h"
#include "xfer/flow_monitor.h"
#include "xfer/kernel.h"

namespace xferd {

// Error names, org.xferd.Xferd1.Error.*: every refusal carries one and a
// sentence a person can act on.
namespace err {
inline constexpr const char* kInvalidManifest = "org.xferd.Xferd1.Error.InvalidManifest";
inline constexpr const char* kUnsupportedUrl = "org.xferd.Xferd1.Error.UnsupportedURL";
inline constexpr const char* kBadFileName = "org.xferd.Xferd1.Error.BadFileName";
inline constexpr const char* kDestination = "org.xferd.Xferd1.Error.DestinationNotWritable";
inline constexpr const char* kTooManyEntries = "org.xferd.Xferd1.Error.TooManyEntries";
inline constexpr const char* kTooManyJobs = "org.xferd.Xferd1.Error.TooManyJobs";
inline constexpr const char* kUnknownPolicy = "org.xferd.Xferd1.Error.UnknownPolicy";
inline constexpr const char* kPolicyForbidden = "org.xferd.Xferd1.Error.PolicyForbidden";
inline constexpr const char* kInvalidArguments = "org.xferd.Xferd1.Error.InvalidArguments";
inline constexpr const char* kNoSuchJob = "org.xferd.Xferd1.Error.NoSuchJob";
inline constexpr const char* kNotOwner = "org.xferd.Xferd1.Error.NotJobOwner";
inline constexpr const char* kBadState = "org.xferd.Xferd1.Error.BadJobState";
inline constexpr const char* kConfig = "org.xferd.Xferd1.Error.ConfigInvalid";
inline constexpr const char* kNotPrivileged = "org.xferd.Xferd1.Error.NotPrivileged";
inline constexpr const char* kInternal = "org.xferd.Xferd1.Error.Internal";
}  // namespace err

// A refusal: the D-Bus error name and its message.
struct Refusal : std::runtime_error {
  Refusal(const char* n, const std::string& m) : std::runtime_error(m), name(n) {}
  const char* name;
};

struct Service;

// One job, live or finished.
struct JobEntry {
  Service* service = nullptr;
  JobRow row;
  Policy policy;                 // as it was when the job was submitted
  nlohmann::json options;        // the caller's
  std::string state;             // queued | discovering | running | paused | done | failed | cancelled
  std::string label;
  // Parsed at Submit or at a restart, handed to the Job when it starts.
  std::optional<xfer::Manifest> manifest;
  // While it runs:
  int dir_fd = -1;
  std::unique_ptr<xfer::EnergyMeter> meter;
  std::unique_ptr<xfer::Job> job;
  bool holds_kernel = false;
  std::string kernel_note;
  int seq = 0;
  std::vector<std::string> kinds;  // chunk names, Params order
  // Last known figures (kept after the job ends):
  xfer::JobProgress progress;
  xfer::Params params;
  double joules = 0;
  std::string energy_source;
  std::string error;
  std::string summary;  // JSON, when finished

  std::string path() const;
  // Keeps the parsed manifest for start(); FilesTotal and BytesTotal from it.
  void take_manifest(xfer::Manifest m);
  bool finished() const { return state == "done" || state == "failed" || state == "cancelled"; }
  ~JobEntry();
};

struct Options {
  std::string config = "/etc/xferd/xferd.conf";
  std::string config_dir = "/etc/xferd/xferd.conf.d";
  std::string state_dir;  // overrides the config's
};

struct Service {
  Service(sd_event* loop, Options o, Config c);
  ~Service();

  sd_event* loop;
  Options opts;
  Config cfg;
  std::unique_ptr<Store> store;
  xfer::Engine engine;
  std::unique_ptr<xfer::FlowMonitor> flows;
  std::unique_ptr<xfer::KernelLayer> kernel;  // lent to one running kernel job at a time
  uint64_t kernel_job = 0;
  sd_bus* bus = nullptr;
  std::map<uint64_t, std::unique_ptr<JobEntry>> jobs;
  bool stopping = false;

  // Manager1
  uint64_t submit(const Caller& c, const std::string& manifest_text, const std::string& dest,
                  const std::string& policy, const nlohmann::json& options);
  std::string reload();  // "" or the error; the old config stays on error
  // Job1
  void cancel(const Caller& c, JobEntry& j);
  void pause(const Caller& c, JobEntry& j);
  void resume(const Caller& c, JobEntry& j);

  // Jobs the store holds unfinished are carried on (after a restart or a crash).
  void restore_jobs();
  // Stop for a restart: every running job checkpoints and stays unfinished in the store.
  void shutdown();
  void purge_old();
  std::string status_line() const;
  void notify_status();  // STATUS= to systemd when it changed

  // Hooks bus.cpp sets: a job's properties changed; a job finished.
  std::function<void(JobEntry&)> on_changed;
  std::function<void(JobEntry&)> on_finished;

 private:
  const Policy& policy_for(const Caller& c, const std::string& name) const;
  void start_queued();
  void start(JobEntry& j);
  void finished(JobEntry& j);
  // The one way a job ends: state, error and summary kept, stored, announced.
  void record_finished(JobEntry& j, const std::string& state, const std::string& error, const std::string& summary);
  void set_state(JobEntry& j, const std::string& s);  // stored and announced when it changes
  // Tears down what a job held while it ran: the Job, its meter, the
  // destination descriptor, and the kernel layer (restoring cores and frequency).
  void retire(JobEntry& j);
  size_t running() const;
  std::string last_status_;
  sd_event_source* reap_ = nullptr;  // retires finished jobs outside their own callbacks
};

bool may_change_kernel(const Config& cfg, const Caller& c);
bool may_use(const Config& cfg, const Policy& p, const Caller& c);

}  // namespace xferd
