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
#include "credentials_args.h"
#include "job_credentials.h"
#include "metrics.h"
#include "errors.h"
#include "config.h"
#include "store.h"
#include "sla_tally.h"
#include "submit_args.h"
#include "user_limits.h"
#include "xfer/bw_schedule.h"
#include "xfer/control_loop.h"
#include "xfer/history.h"
#include "xfer/hla.h"
#include "xfer/options.h"
#include "xfer/node.h"
#include "xfer/running_job.h"
#include "xfer/slots.h"

namespace xferd {

struct Service;

// A directory, whatever path named it.
struct DirKey {
  dev_t dev = 0;
  ino_t ino = 0;
  bool operator!=(const DirKey& o) const { return dev != o.dev || ino != o.ino; }
};
DirKey dest_key(int dir_fd);

// A job's object path on the bus.
std::string job_path(uint64_t id);

// The daemon's record of one job, live or finished (its Job, while it runs,
// is in `run`). A finished job keeps only what ListJobs and its properties
// show; its manifest and summary stay in the store.
struct JobRecord {
  Service* service = nullptr;
  JobRow row;
  Policy policy;                 // as it was when the job was submitted
  nlohmann::json options;        // the caller's
  xfer::JobState state = xfer::JobState::Queued;
  std::string label;
  // Parsed at Submit or at a restart, handed to the Job when it starts.
  std::optional<xfer::Manifest> manifest;
  // While it runs:
  int dir_fd = -1;
  int ca_fd = -1;       // the job's own ca_file, opened as its owner; read when it starts
  uint64_t check = 0;   // a CallerChecks check opening its files, while one runs
  std::unique_ptr<xfer::RunningJob> run;  // the Job, its control loop and its history rows
  std::string kernel_note;
  std::vector<std::string> kinds;  // chunk names, Params order
  // Many jobs on one machine: how the arbiter sees it (from its policy and
  // options), its place in the queue, and why it waits when it does.
  xfer::JobClass cls = xfer::JobClass::Normal;
  SlaTally sla;             // its promise (floor or ceiling) and how its intervals kept it
  uint64_t queued_seq = 0;  // queue order: set at Submit and each time it goes back to the queue
  std::string waiting;      // what a queued job waits for ("" when it only waits for a slot)
  bool yield = false;       // to go back to the queue at the next turn of the loop (a slot for another)
  uint64_t slow_since_us = 0;  // moving under limits.yield_below_kbps since (0: not)
  // Last known figures (kept after the job ends):
  xfer::JobProgress progress;
  xfer::Params params;
  double throughput_bps = 0;  // the last interval's
  double joules = 0;
  std::string energy_source;
  std::string error;
  std::string summary;  // JSON, only between the end and the Finished signal (then in the store)
  // While unfinished: the directory and the file names it is to write (sorted),
  // so that no two jobs write one name.
  DirKey dest;
  std::vector<std::string> names;
  // The bus connections its signals go to (unique names): the one that
  // submitted it and each of its owner's (or root's) that has called on it
  // since, newest last, at most kMaxWatchers. Signals about a job are never
  // broadcast: another user's match rule would receive them.
  std::vector<std::string> watchers;
  // Its credentials (never stored: a restart keeps only what kinds it had,
  // `credentials_kinds`, and the job waits in needs-credentials for its owner
  // to give them again), and the origins of its entries they bind to (found
  // when credentials first matter: Submit, SetCredentials, a policy's at start).
  std::shared_ptr<const xfer::JobCredentials> credentials;
  std::string credentials_kinds;
  std::vector<std::string> origins;
  static constexpr size_t kMaxWatchers = 16;
  // What of its figures the metrics' counters hold already (they only ever
  // grow): bytes and kernel changes of the run in progress, files of the job.
  struct Counted {
    uint64_t fetched = 0;
    int kernel_changes = 0;
    size_t files_done = 0, files_failed = 0;
  } counted;
  void watch(const char* unique_name);

  xfer::Job* job() const { return run ? &run->job() : nullptr; }
  // The Job's figures while it runs, else the last known.
  xfer::JobProgress live_progress() const { return run ? run->job().progress() : progress; }
  std::string path() const;
  // The arbiter's allotment while it runs ("cap N Mbit/s: why", "no cap: why"), else "".
  std::string allotment() const;
  // Keeps the parsed manifest for start(); FilesTotal and BytesTotal from it.
  void take_manifest(xfer::Manifest m);
  bool finished() const { return xfer::finished(state); }
  ~JobRecord();
};

struct Options {
  std::string config = kConfigFile;
  std::string config_dir = kConfigDir;
  std::string state_dir;  // overrides the config's
};

struct Service {
  Service(sd_event* loop, Options o, Config c);
  // Throws StoreError when the state directory or job store is one another
  // user could write (the start refuses it; so does --check-config).
  static void check_state_dir(const std::string& dir);
  ~Service();

  sd_event* loop;
  Options opts;
  Config cfg;
  // What is opened as a caller, by children the loop never waits for.
  CallerChecks checks;
  static constexpr size_t kMaxChecksPerUser = 4;
  std::unique_ptr<Store> store;
  // The transfer history (xfer/history.h); null when it could not be opened
  // (logged: the jobs run, unrecorded).
  std::unique_ptr<xfer::hla::History> history;
  // The parameter table ([hla] table) from xfer-hla analyze; null: none. Read
  // at start and on Reload / SIGHUP; a table that fails to load keeps the
  // one in use.
  std::shared_ptr<const xfer::hla::ParamTable> hla_table;
  std::string load_hla_table();  // "" or the error
  // For GetPolicies: "table FILE: N strata, learnt H hours ago" or that there
  // is none (the hla policies then start cold, on the heuristics).
  std::string hla_table_state() const;
  // The node's shared parts (xfer/node.h), as the arbiter's tests and the
  // bench run them: the engine, the flow monitor, the machine (energy,
  // interface bytes and CPU, measured once and shared), the arbiter (the
  // link among the running jobs: floors first, then classes, users by
  // weight; its capacity network.bandwidth_mbps when the config sets it,
  // else measured) and the kernel layer, lent while a job whose policy may
  // turn it runs.
  xfer::Node node;
  double link_capacity_bps() const;
  // [network] schedule: the link's rate by day and hour, applied as a limit
  // the arbiter divides; looked at every 30 s and at Reload.
  xfer::BandwidthSchedule schedule;
  void apply_schedule();
  void apply_link_config();  // the capacity and the schedule from cfg (start, Reload)
  sd_bus* bus = nullptr;
  std::map<uint64_t, std::unique_ptr<JobRecord>> jobs;

  // Metrics (metrics.h). The counters and histograms outlive the jobs that
  // fed them; the gauges are built at each scrape, which costs nothing while
  // nobody scrapes. scrape() brings the counters up to date first.
  MetricSet counters;
  std::string scrape();
  // A job's report as JSON (Job1.Report): so far while it runs, its summary
  // once finished; with its promise and how its intervals kept it ("sla").
  std::string report(const JobRecord& j) const;
  // What the machine is now, for the metrics and Manager1's properties:
  // online CPUs, and the frequency (kHz; 0: no cpufreq driver).
  int online_cpus() const;
  long cpu_khz() const;
  bool stopping = false;

  // Manager1
  // Checks what it can at once (throws Refusal); the destination and a CA
  // file are opened as the caller asynchronously, and reply() is called once
  // with the new job's id, or with the refusal.
  using SubmitReply = std::function<void(uint64_t id, const Refusal* refused)>;
  void submit(const Caller& c, SubmitRequest req, SubmitReply reply);
  std::string reload();  // "" or the error; the old config stays on error
  // Job1
  void cancel(const Caller& c, JobRecord& j);
  void pause(const Caller& c, JobRecord& j);
  void resume(const Caller& c, JobRecord& j);
  // New credentials from the job's owner (only): a job waiting for them
  // (needs-credentials) goes on; a running one uses them from now on.
  void set_credentials(const Caller& c, JobRecord& j, CredentialArgs a);

  // Jobs the store holds unfinished are carried on (after a restart or a crash).
  void restore_jobs();
  // Stop for a restart: every running job checkpoints and stays unfinished in the store.
  void shutdown();
  void purge_old();
  std::string status_line() const;
  void notify_status();  // STATUS= to systemd when it changed

  // The entries a Submit from c may carry, read before its manifest: what
  // is left of the per-user limit when less than the per-job one, so a
  // caller at its limit is refused at its first entry, not after a parse of
  // all of them on the loop (seconds for 100,000). Refuses a caller with
  // too many jobs at once.
  EntryLimit entry_limit(const Caller& c) const;

  // Hooks bus.cpp sets: a job's properties changed; a job finished.
  std::function<void(JobRecord&)> on_changed;
  std::function<void(JobRecord&)> on_finished;

 private:
  const Policy& policy_for(const Caller& c, const std::string& name) const;
  // A job's settings in layers: the config's sections, its policy, its options.
  xfer::OptionLayers layers(const Policy& p, const nlohmann::json& options) const;
  // "" or why n would write a name an unfinished job in the same directory writes.
  std::string name_clash(const JobRecord& n) const;
  // What a user's jobs hold (but `except`), against the [limits] per user (user_limits.h).
  UserHoldings holdings(uid_t uid, const JobRecord* except = nullptr) const;
  // Submit's second half, once the caller's files are open: the job is stored and queued.
  uint64_t admit(const Caller& c, SubmitRequest req, int dir_fd, int ca_fd);
  // At most limits.max_finished_per_user finished jobs per user are kept.
  void forget_oldest_finished(uid_t uid);
  void start_queued();
  // A running job leaves its slot, its progress kept: paused (requeue false)
  // or back to the end of the queue (a yield to another user's or a starved job).
  void unseat(JobRecord& j, const std::string& why, bool requeue);
  // Cancel of a job that is not running: an earlier run's partial files go.
  void remove_partial_files(JobRecord& j);
  uint64_t next_seq_ = 0;
  // The floors set aside now, bits/s: of the jobs running or starting (a
  // queued or paused job holds none), less those the arbiter released (a
  // source that did not carry its floor).
  double admitted_floors() const;
  // The unfinished jobs as the queue sees them (xfer/slots.h), and its limits.
  std::vector<xfer::Seat> seats() const;
  xfer::SlotLimits slot_limits() const;
  // Who should give a slot up for a waiting user.
  void share_slots();
  bool slot_wanted() const;  // every slot is held and a job waits for one alone
  // A running job moving under this for this long gives its slot to a
  // waiting job (issue 39: 16 dripping jobs of one user held every slot).
  static constexpr double kYieldBelowBps = 64e3;
  static constexpr uint64_t kYieldAfterUs = 20'000'000;
  void start(JobRecord& j);
  bool reopen_as_owner(JobRecord& j);  // true: its files are being opened again as its owner
  std::string job_ca(JobRecord& j, std::string* why);
  // The kernel layer's config for a job whose policy may turn it (none,
  // with j.kernel_note saying why, for one that may not).
  std::optional<xfer::KernelLayer::Config> kernel_for(JobRecord& j, const xfer::ResolvedOptions& setup);
  void follow(JobRecord& j);  // hooks a running job's intervals, states and end to the service
  void fail(JobRecord& j, const std::string& why);  // a job that could not start ends Failed, with the reason
  void finished(JobRecord& j);
  // The one way a job ends: state, error and summary kept, stored, announced.
  void record_finished(JobRecord& j, xfer::JobState state, const std::string& error, const std::string& summary);
  void set_state(JobRecord& j, xfer::JobState s);  // stored and announced when it changes
  // Tears down what a job held while it ran: its loop, the Job, the
  // destination descriptor, and the kernel layer (restoring cores and frequency).
  void retire(JobRecord& j);
  // A job's run's figures into the counters, since they were last counted.
  void count(JobRecord& j);
  void count_interval(JobRecord& j, const xfer::IntervalRecord& r);
  void declare_counters();
  // The history at [history] url (default STATE_DIR/history.db); moves a
  // pre-v3 store's intervals into it.
  void open_history(const std::string& state_dir);
  std::string last_status_;
  sd_event_source* reap_ = nullptr;
  sd_event_source* schedule_timer_ = nullptr;  // retires finished jobs outside their own callbacks
};

bool may_change_kernel(const Config& cfg, const Caller& c);
// The job's promise and how its intervals kept it, into its summary or report ("sla").
void add_sla(const JobRecord& j, nlohmann::json& summary);
bool may_use(const Config& cfg, const Policy& p, const Caller& c);

}  // namespace xferd
