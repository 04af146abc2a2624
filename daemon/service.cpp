#include "service.h"

#include <algorithm>
#include <chrono>
#include <malloc.h>

#include <sys/stat.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include <ctime>
#include <set>
#include <fmt/format.h>
#include <sstream>

#include "xfer/log.h"
#include "job_credentials.h"
#include "submit_args.h"
#include "user_limits.h"
#include "xfer/manifest.h"
#include "xfer/part_file.h"
#include "xfer/safe_open.h"
#include "xfer/text.h"
#include "xfer/tuner.h"

namespace xferd {

namespace log = xfer::log;

namespace {

double unix_now() { return double(time(nullptr)); }

std::string policy_names(const Config& c) {
  std::string s;
  for (const auto& [n, _] : c.policies) s += (s.empty() ? "" : ", ") + n;
  return s;
}

}  // namespace

std::string job_path(uint64_t id) { return "/org/xferd/Xferd1/job/" + std::to_string(id); }
std::string JobRecord::path() const { return job_path(row.id); }

void JobRecord::take_manifest(xfer::Manifest m) {
  progress.files_total = m.entries.size();
  progress.bytes_total = 0;
  names.clear();
  names.reserve(m.entries.size());
  for (const auto& e : m.entries) {
    progress.bytes_total += e.size.value_or(0);
    names.push_back(e.name);
  }
  std::sort(names.begin(), names.end());
  manifest = std::move(m);
}

void JobRecord::watch(const char* unique_name) {
  if (!unique_name || !*unique_name) return;
  std::erase(watchers, std::string(unique_name));
  if (watchers.size() >= kMaxWatchers) watchers.erase(watchers.begin());
  watchers.emplace_back(unique_name);
}

DirKey dest_key(int dir_fd) {
  struct stat st;
  if (fstat(dir_fd, &st) != 0) return {};
  return {st.st_dev, st.st_ino};
}

JobRecord::~JobRecord() {
  run.reset();  // before the destination descriptor its Job writes through
  if (dir_fd >= 0) close(dir_fd);
  if (ca_fd >= 0) close(ca_fd);
}

bool may_change_kernel(const Config& cfg, const Caller& c) {
  return c.root() || (!cfg.kernel_group.empty() && c.member_of(cfg.kernel_group));
}

bool may_use(const Config& cfg, const Policy& p, const Caller& c) {
  if (p.kernel && !may_change_kernel(cfg, c)) return false;
  if (p.users.empty() && p.groups.empty()) return true;
  if (c.root()) return true;
  for (const auto& u : p.users)
    if (c.is(u)) return true;
  for (const auto& g : p.groups)
    if (c.member_of(g)) return true;
  return false;
}

void Service::check_state_dir(const std::string& dir) {
  // The store says what runs as whom and where: a state directory or store
  // another user could write would let that user plant root's jobs.
  // (A directory not made yet, at --check-config, holds no store to check.)
  try {
    xfer::require_trusted(dir, xfer::Trusted::Directory, "state directory");
    struct stat st;
    if (lstat(dir.c_str(), &st) == 0) xfer::require_trusted(dir + "/xferd.db", xfer::Trusted::File, "job store");
  } catch (const xfer::UntrustedPath& e) {
    throw StoreError(e.what());
  }
}

namespace {

// The node's parts as the config sets them: [daemon] flows (auto is eBPF
// here: loaded once for every job the daemon runs) and the power model.
xfer::Node::Config node_config(const Config& cfg) {
  xfer::Node::Config n;
  const std::string flows = cfg.text("flows");
  n.flows = flows == "off"        ? xfer::Node::Config::Flows::Off
            : flows == "tcp_info" ? xfer::Node::Config::Flows::TcpInfo
                                  : xfer::Node::Config::Flows::Ebpf;
  n.power = xfer::load_power_model(cfg.text("power_model"));
  return n;
}

}  // namespace

Service::Service(sd_event* l, Options o, Config c)
    : loop(l), opts(std::move(o)), cfg(std::move(c)), checks(l), node(l, node_config(cfg)) {
  std::string dir = opts.state_dir.empty() ? cfg.state_dir : opts.state_dir;
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
    throw StoreError("state directory " + dir + ": " + strerror(errno));
  check_state_dir(dir);
  store = std::make_unique<Store>(dir + "/xferd.db");
  declare_counters();
  // The journal fields of a job's lines (xfer/log.h): its policy, owner and label.
  log::set_job_fields([this](uint64_t id, log::Fields& out) {
    auto it = jobs.find(id);
    if (it == jobs.end()) return;
    out.emplace_back("XFERD_POLICY", it->second->policy.name);
    out.emplace_back("XFERD_UID", std::to_string(it->second->row.uid));
    if (!it->second->label.empty()) out.emplace_back("XFERD_LABEL", it->second->label);
  });
  open_history(dir);
  load_hla_table();
  apply_link_config();
  sd_event_add_time_relative(
      loop, &schedule_timer_, CLOCK_MONOTONIC, 30'000'000, 1'000'000,
      [](sd_event_source* s, uint64_t, void* ud) {
        static_cast<Service*>(ud)->apply_schedule();
        sd_event_source_set_time_relative(s, 30'000'000);
        return 0;
      },
      this);
  sd_event_source_set_enabled(schedule_timer_, SD_EVENT_ON);
  if (node.arbiter().capacity_measured())
    log::info("arbiter: no network.bandwidth_mbps in the config: the link's capacity is measured from what the jobs "
              "move while their flows show it full (their RTT rising above its least); until then no job is capped "
              "and no floor refused by it");
  // A journal a crashed xferd left: cores and frequency go back now.
  if (cfg.text("kernel_mode") != "off") {
    try {
      if (xfer::KernelJournal::restore_leftover(cfg.text("kernel_state")))
        log::warn("kernel layer: restored the cores / frequency a previous xferd left changed ({})",
                  cfg.text("kernel_state"));
    } catch (const std::exception& e) {
      log::warn("kernel layer: {}", e.what());
    }
  }
  sd_event_add_defer(
      loop, &reap_,
      [](sd_event_source*, void* ud) {
        auto* s = static_cast<Service*>(ud);
        for (auto& [id, j] : s->jobs) {
          if (j->finished() && j->run) s->retire(*j);
          if (j->yield && j->run && !j->finished()) s->unseat(*j, "yields its slot", true);
          j->yield = false;
        }
        s->start_queued();
        return 0;
      },
      this);
  sd_event_source_set_enabled(reap_, SD_EVENT_OFF);
}

Service::~Service() {
  log::set_job_fields(nullptr);
  sd_event_source_unref(reap_);
  sd_event_source_disable_unref(schedule_timer_);
  jobs.clear();  // before the node: their runs borrow its parts
}

void Service::retire(JobRecord& j) {
  bool had_job = j.run != nullptr;
  log::JobScope scope(j.row.id);
  count(j);
  node.retire(j.run);  // the last job holding the kernel layer restores cores and frequency
  if (j.dir_fd >= 0) close(j.dir_fd);
  j.dir_fd = -1;
  if (had_job) malloc_trim(0);  // a large job's memory goes back to the system, not only to malloc
}

bool Service::slot_wanted() const { return xfer::slot_wanted(seats(), slot_limits()); }

xfer::SlotLimits Service::slot_limits() const {
  return xfer::SlotLimits{size_t(cfg.max_running_jobs), size_t(cfg.max_running_entries)};
}

std::vector<xfer::Seat> Service::seats() const {
  std::vector<xfer::Seat> out;
  for (const auto& [id, j] : jobs) {
    if (j->finished()) continue;
    xfer::Seat s;
    s.id = id, s.uid = j->row.uid, s.seq = j->queued_seq;
    s.seated = j->run || j->check;  // a job whose files are being opened holds its slot
    s.queued = j->state == xfer::JobState::Queued && !s.seated;
    s.running = j->run && j->state == xfer::JobState::Running;
    s.started = j->run != nullptr;
    s.floor_held = s.seated && j->state != xfer::JobState::Paused && j->state != xfer::JobState::NeedsCredentials &&
                   !node.arbiter().floor_released(uint32_t(id));
    s.waits_for_room = !j->waiting.empty();
    s.entries = j->progress.files_total;
    s.floor_bps = j->sla.floor_bps;
    out.push_back(s);
  }
  return out;
}

std::string JobRecord::allotment() const {
  if (!run || run->loop().allotment().reason.empty()) return "";
  const xfer::Allotment& a = run->loop().allotment();
  return (a.cap_bps > 0 ? fmt::format("cap {:.1f} Mbit/s", a.cap_bps / 1e6) : std::string("no cap")) + ": " + a.reason;
}

void Service::apply_link_config() {
  node.arbiter().set_capacity(link_capacity_bps());
  node.arbiter().set_origin_connections(int(cfg.values["max_connections_per_origin"].get<double>()));
  schedule = xfer::BandwidthSchedule::parse(cfg.text("bandwidth_schedule"));  // checked by load_config
  apply_schedule();
}

void Service::apply_schedule() {
  std::optional<double> mbps = schedule.mbps_now();
  node.arbiter().set_limit(mbps ? *mbps * 1e6 : 0);
}

double Service::link_capacity_bps() const {
  return cfg.configured("bandwidth_mbps") ? cfg.values["bandwidth_mbps"].get<double>() * 1e6 : 0;
}

double Service::admitted_floors() const { return xfer::floors_held(seats()); }


// A waiting user with fewer than a fair share of the slots takes one from
// the user holding the most above it (xfer/slots.h). One at a time.
void Service::share_slots() {
  for (const auto& [id, j] : jobs)
    if (j->yield) return;  // one is already on its way out
  std::optional<xfer::YieldPick> y = xfer::who_yields(seats(), slot_limits());
  if (!y) return;
  log::info("job {}: yields its slot: its user (uid {}) holds {} of {} slots, above a fair {} while {} user(s) wait",
            y->id, y->uid, y->holds, cfg.max_running_jobs, y->fair, y->users_waiting);
  jobs.at(y->id)->yield = true;
  sd_event_source_set_enabled(reap_, SD_EVENT_ONESHOT);
}

void Service::unseat(JobRecord& j, const std::string& why, bool requeue) {
  log::JobScope scope(j.row.id);
  if (!j.run) return;
  log::info("job {}: {}; its progress is kept and it goes on from there", j.row.id, why);
  j.job()->pause();  // checkpoints every .part
  j.run->record_end("interrupted");  // the next start is a new run
  retire(j);
  j.slow_since_us = 0;
  if (requeue) {
    set_state(j, xfer::JobState::Queued);
    j.queued_seq = ++next_seq_;
  }
}

std::string Service::hla_table_state() const {
  if (!hla_table) return "no parameter table loaded: a cold start on the heuristics ([hla] table)";
  double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  double hours = std::max(0.0, now - hla_table->generated_unix) / 3600;
  return fmt::format("table {}: {} strata, learnt {:.1f} h ago from {} rows ({})", xfer::printable(cfg.text("hla_table")),
                     hla_table->strata.size(), hours, hla_table->rows_used,
                     xfer::printable(xfer::hla::known_strata(*hla_table, 4)));
}

std::string Service::load_hla_table() {
  std::string path = cfg.text("hla_table");
  if (path.empty()) {
    if (hla_table) log::info("hla table: none configured any more");
    hla_table.reset();
    return "";
  }
  try {
    hla_table = std::make_shared<const xfer::hla::ParamTable>(xfer::hla::load_table(path));
  } catch (const std::exception& e) {
    log::error("hla table: {}; {}", xfer::printable(e.what()),
               hla_table ? "the table loaded before is kept" : "jobs start without one");
    return e.what();
  }
  log::info("hla table: {}: {}", xfer::printable(path), xfer::printable(xfer::hla::describe(*hla_table)));
  return "";
}

void Service::open_history(const std::string& state_dir) {
  std::string where = cfg.text("history");
  if (where.empty()) where = state_dir + "/history.db";
  xfer::hla::HistoryOptions o;
  o.journal = cfg.text("history_journal");
  if (o.journal.empty()) o.journal = state_dir + "/history.db";
  try {
    history = xfer::hla::open_history(where, o);
    log::info("history: {}", xfer::printable(history->where()));
  } catch (const std::exception& e) {
    log::error("history: {}; jobs run without being recorded until it is fixed (then Reload or restart)",
               xfer::printable(e.what()));
    return;
  }
  // A store from before version 3 kept the intervals itself: they move to
  // the history, and leave the store only once the history holds them.
  try {
    std::vector<xfer::hla::LegacyInterval> legacy = store->legacy_intervals();
    if (legacy.empty()) return;
    xfer::hla::migrate_legacy(*history, legacy);
    store->drop_legacy_intervals();
    log::info("history: moved {} interval records from the job store into {}", legacy.size(),
              xfer::printable(history->where()));
  } catch (const std::exception& e) {
    log::error("history: moving the job store's interval records: {}; they stay in the store", xfer::printable(e.what()));
  }
}

xfer::OptionLayers Service::layers(const Policy& p, const nlohmann::json& options) const {
  xfer::OptionLayers l;
  l.global = cfg.values;
  l.global_bandwidth_configured = cfg.configured("bandwidth_mbps");
  l.policy = p.values;
  l.job = options;
  l.job_scope = xfer::kJob;
  return l;
}

const Policy& Service::policy_for(const Caller& c, const std::string& name) const {
  std::string n = name;
  if (n.empty()) n = may_change_kernel(cfg, c) ? cfg.default_policy : cfg.default_policy_unprivileged;
  auto it = cfg.policies.find(n);
  if (it == cfg.policies.end())
    throw Refusal(err::kUnknownPolicy, "no policy named '" + xfer::shown(n, 64) + "'; this daemon has: " + policy_names(cfg));
  if (!may_use(cfg, it->second, c)) {
    if (it->second.kernel && !may_change_kernel(cfg, c))
      throw Refusal(err::kPolicyForbidden,
                    "policy '" + n + "' changes CPU cores and frequency, which only root and members of group '" +
                        cfg.kernel_group + "' may ask for; " + c.name + " may use an application-layer policy such as '" +
                        cfg.default_policy_unprivileged + "'");
    throw Refusal(err::kPolicyForbidden, "policy '" + n + "' is not open to " + c.name + " (see its users and groups in the config)");
  }
  return it->second;
}

namespace {
}  // namespace



UserHoldings Service::holdings(uid_t uid, const JobRecord* except) const {
  UserHoldings h;
  for (const auto& [id, j] : jobs) {
    if (j->row.uid != uid || j.get() == except) continue;
    if (j->credentials) h.secret_bytes += j->credentials->secret_bytes();  // wiped when a job ends
    if (j->finished()) continue;
    ++h.jobs;
    h.entries += j->progress.files_total;
    h.floors_bps += j->sla.floor_bps;
  }
  return h;
}

EntryLimit Service::entry_limit(const Caller& c) const { return UserLimits(cfg).entries_left(c.name, holdings(c.uid)); }


namespace {

// A descriptor that closes unless it is taken.
struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  ~Fd() {
    if (fd >= 0) close(fd);
  }
  int take() { return std::exchange(fd, -1); }
};

}  // namespace

void Service::submit(const Caller& c, SubmitRequest req, SubmitReply reply) {
  const Policy& p = policy_for(c, req.policy);
  // The options with the policy's and the config's, as the job will start.
  xfer::ResolvedOptions setup;
  try {
    setup = xfer::setup_job(p.algorithm, layers(p, req.options));
  } catch (const xfer::OptionError& e) {
    throw Refusal(err::kInvalidArguments, std::string(e.what()) + " (policy '" + p.name + "')");
  }
  // A floor is admitted only if it fits beside the floors admitted already
  // (or waits for room, when its policy says admission = "queue").
  double floor = xfer::job_floor_bps(p.algorithm, setup.tuner);
  const UserLimits limits(cfg);
  const UserHoldings holds = holdings(c.uid);
  limits.check_floors(c.name, holds, floor);
  if (floor > 0 && !setup.queue_unfit)
    if (std::string why = node.arbiter().admit(floor, admitted_floors()); !why.empty())
      throw Refusal(err::kFloorDoesNotFit, why + "; nothing fetched (policy '" + p.name + "')");
  limits.check_jobs(c.name, holds, req.manifest.entries.size());
  if (checks.pending(c.uid) >= kMaxChecksPerUser)
    throw Refusal(err::kTooManyJobs, fmt::format("{} has {} submissions whose destination is still being checked; wait "
                                                 "for their answers",
                                                 c.name, checks.pending(c.uid)));
  // The destination (and a CA file) are opened as the caller by a child
  // process; the loop goes on meanwhile and the reply waits for the answer.
  std::vector<OpenRequest> open{{req.dest, OpenAs::WritableDirectory}};
  if (req.options.contains("ca_file")) open.push_back({req.options["ca_file"].get<std::string>(), OpenAs::ReadableFile});
  auto held = std::make_shared<SubmitRequest>(std::move(req));
  std::string why;
  uint64_t check = checks.start(
      c, std::move(open),
      [this, c, held, reply](std::vector<int> fds, const std::string& refused, size_t failed) {
        Fd dir(fds.empty() ? -1 : fds[0]), ca(fds.size() > 1 ? fds[1] : -1);
        try {
          if (!refused.empty()) {
            if (failed == 1) throw Refusal(err::kInvalidArguments, "option ca_file: " + refused + "; nothing fetched");
            throw Refusal(err::kDestination, refused + "; nothing fetched");
          }
          reply(admit(c, std::move(*held), dir.take(), ca.take()), nullptr);
        } catch (const Refusal& r) {
          reply(0, &r);
        } catch (const std::exception& e) {
          Refusal r(err::kInternal, e.what());
          reply(0, &r);
        }
      },
      &why);
  if (!check) throw Refusal(err::kDestination, why + "; nothing fetched");
}

uint64_t Service::admit(const Caller& c, SubmitRequest req, int dir_fd, int ca_fd) {
  Fd dir(dir_fd), ca(ca_fd);
  // Other jobs may have come meanwhile, and the configuration may have changed.
  const Policy& p = policy_for(c, req.policy);
  UserLimits(cfg).check_jobs(c.name, holdings(c.uid), req.manifest.entries.size());
  if (ca.fd >= 0) {
    std::string why;
    read_ca_pem(ca.fd, req.options["ca_file"].get<std::string>(), &why);
    if (!why.empty()) throw Refusal(err::kInvalidArguments, "option ca_file: " + why + "; nothing fetched");
  }
  const nlohmann::json& options = req.options;
  xfer::Manifest& m = req.manifest;
  auto j = std::make_unique<JobRecord>();
  j->service = this;
  j->dir_fd = dir.take();
  j->ca_fd = ca.take();
  j->dest = dest_key(j->dir_fd);
  j->take_manifest(std::move(m));
  // A name is written by one job at a time: two jobs that would both write
  // NAME in one directory would share NAME.part.
  if (std::string clash = name_clash(*j); !clash.empty()) throw Refusal(err::kNameInUse, clash);
  j->row.uid = c.uid;
  j->row.gid = c.gid;
  j->row.dest = req.dest;
  j->row.manifest = xfer::to_text(*j->manifest);
  j->row.policy = p.name;
  if (req.credentials) {
    j->origins = xfer::manifest_origins(*j->manifest);
    j->credentials = bind_credentials(std::move(*req.credentials), j->origins);
    UserLimits(cfg).check_secrets(c.name, holdings(c.uid), j->credentials->secret_bytes());
    j->credentials_kinds = j->credentials->describe();
  }
  // The store keeps what kinds of credentials the job had, never them.
  nlohmann::json stored = options;
  if (j->credentials) stored["credentials"] = j->credentials_kinds;
  j->row.options = stored.dump();
  j->row.submitted_at = unix_now();
  j->row.state = xfer::to_string(xfer::JobState::Queued);
  j->policy = p;
  j->options = options;
  j->label = options.value("label", "");
  j->state = xfer::JobState::Queued;
  j->queued_seq = ++next_seq_;
  try {
    xfer::ResolvedOptions setup = xfer::setup_job(p.algorithm, layers(p, options));
    j->cls = setup.cls;
    j->sla.floor_bps = xfer::job_floor_bps(p.algorithm, setup.tuner);
  } catch (const xfer::OptionError& e) {  // the config changed since the check above
    throw Refusal(err::kInvalidArguments, std::string(e.what()) + " (policy '" + p.name + "')");
  }
  try {
    store->insert(j->row);
  } catch (const StoreError& e) {
    throw Refusal(err::kInternal, std::string("could not record the job: ") + e.what());
  }
  j->row.manifest.clear();  // the store keeps the text; the parsed manifest is enough here
  j->row.manifest.shrink_to_fit();
  uint64_t id = j->row.id;
  log::info("job {}: submitted by {} (uid {}): {} files into {}, policy {}{}", id, c.name, c.uid, j->progress.files_total,
            req.dest, p.name, j->credentials ? "; credentials: " + j->credentials_kinds : "");
  jobs[id] = std::move(j);
  start_queued();
  return id;
}

std::string Service::name_clash(const JobRecord& n) const {
  for (const auto& [id, j] : jobs) {
    if (j.get() == &n || j->finished() || j->dest != n.dest) continue;
    // Both lists sorted: one pass.
    auto a = j->names.cbegin();
    auto b = n.names.cbegin();
    while (a != j->names.end() && b != n.names.end()) {
      if (*a < *b) ++a;
      else if (*b < *a) ++b;
      else
        return fmt::format("job {} ({}) is to write a file named '{}' into {} and has not finished; a name is written "
                           "by one job at a time: wait for it, cancel it, or choose another destination",
                           id, xfer::to_string(j->state), xfer::printable(*a), xfer::printable(j->row.dest));
    }
  }
  return "";
}


// The queue (xfer/slots.h): the oldest queued job of the user holding the
// fewest slots, among those that fit, until no slot is left or none fits.
void Service::start_queued() {
  if (stopping) return;
  std::set<uint64_t> tried;  // each job is started once a pass (one that fails ends; one that opens holds its slot)
  const auto admit = [this](double floor, double held) { return node.arbiter().admit(floor, held); };
  for (;;) {
    std::vector<xfer::Seat> s = seats();
    for (xfer::Seat& x : s) x.queued = x.queued && !tried.count(x.id);
    xfer::NextPick pick = xfer::next_to_start(s, slot_limits(), admit);
    for (const auto& [id, why] : pick.waits) {
      JobRecord& j = *jobs.at(id);
      if (pick.for_floor.count(id) && j.waiting != why) log::info("job {}: waits: {}", id, why);
      j.waiting = why;
    }
    if (!pick.start) break;
    tried.insert(*pick.start);
    start(*jobs.at(*pick.start));
  }
  share_slots();
  // A job that waits keeps its file names (for name clashes) and totals; its
  // manifest is read from the store again when it starts.
  for (auto& [id, j] : jobs)
    if (!j->run && j->manifest) j->manifest.reset();
  notify_status();
}

void Service::set_state(JobRecord& j, xfer::JobState s) {
  log::JobScope scope(j.row.id);
  if (j.state == s) return;
  if (!xfer::may_change(j.state, s)) {
    log::warn("job {}: {} -> {} refused: {} is final", j.row.id, xfer::to_string(j.state), xfer::to_string(s),
              xfer::to_string(j.state));
    return;
  }
  j.state = s;
  // The store keeps what a restart needs: a job that was discovering runs again.
  std::string stored = xfer::to_string(s == xfer::JobState::Discovering ? xfer::JobState::Running : s);
  if (j.row.state != stored && !j.finished()) {
    j.row.state = stored;
    try {
      store->set_state(j.row.id, stored);
    } catch (const StoreError& e) {
      log::error("job {}: {}", j.row.id, e.what());
    }
  }
  if (on_changed) on_changed(j);
  notify_status();
}

void Service::fail(JobRecord& j, const std::string& why) {
  log::JobScope scope(j.row.id);
  log::event(log::msg::kJobFailed, spdlog::level::err, "job {}: failed: {}", j.row.id, xfer::shown(why, 4096));
  record_finished(j, xfer::JobState::Failed, why,
                  nlohmann::json{{"state", "failed"}, {"job", j.row.id}, {"error", why}}.dump());
}

// A job's destination and CA file, opened again as its owner when it is
// carried on after a restart, by a child the loop does not wait for. True
// when that is under way (start() is called again when it answers).
bool Service::reopen_as_owner(JobRecord& j) {
  std::string ca_file = j.options.value("ca_file", std::string());
  bool need_dir = j.dir_fd < 0, need_ca = !ca_file.empty() && j.ca_fd < 0;
  if (!need_dir && !need_ca) return false;
  std::vector<OpenRequest> open;
  if (need_dir) open.push_back({j.row.dest, OpenAs::WritableDirectory});
  if (need_ca) open.push_back({ca_file, OpenAs::ReadableFile});
  JobRecord* jp = &j;
  std::string why;
  j.check = checks.start(
      caller_for(j.row.uid, j.row.gid), std::move(open),
      [this, jp, need_dir, need_ca](std::vector<int> fds, const std::string& refused, size_t failed) {
        jp->check = 0;
        size_t i = 0;
        if (need_dir) jp->dir_fd = fds[i++];
        if (need_ca) jp->ca_fd = fds[i++];
        if (!refused.empty()) {
          fail(*jp, need_ca && failed == (need_dir ? 1 : 0) ? "ca_file: " + refused : refused);
        } else {
          if (need_dir) jp->dest = dest_key(jp->dir_fd);
          start(*jp);
        }
        start_queued();
      },
      &why);
  if (!j.check) fail(j, need_dir ? why : "ca_file: " + why);
  return true;
}

// https: the job's own CA bundle (opened as its owner at Submit), else the
// policy's (the admin's, read as root), instead of the system's store.
// "" with *why set when it is unusable.
std::string Service::job_ca(JobRecord& j, std::string* why) {
  std::string ca_pem;
  if (j.ca_fd >= 0) {
    std::string bad;
    ca_pem = read_ca_pem(j.ca_fd, j.options.value("ca_file", std::string()), &bad);
    close(j.ca_fd);
    j.ca_fd = -1;
    if (!bad.empty()) *why = "ca_file: " + bad;
    return why->empty() ? ca_pem : "";
  }
  return policy_ca_pem(j.policy, why);
}

// The kernel layer: every job whose policy may turn it shares it (the most
// any asks is set); the others tune the application layer only, and
// kernel_note says why. It is opened with the widest range (the [kernel]
// section's mode and journal); each job asks within its policy's.
std::optional<xfer::KernelLayer::Config> Service::kernel_for(JobRecord& j, const xfer::ResolvedOptions& setup) {
  j.kernel_note.clear();
  if (!j.policy.kernel) {
    j.kernel_note = "policy " + j.policy.name + " tunes the application layer only";
  } else if (!setup.kernel) {
    j.kernel_note = "kernel layer off in the config ([kernel] mode)";
  } else {
    xfer::KernelLayer::Config widest = setup.kernel_config;
    widest.min_cores = 1, widest.max_cores = 0, widest.min_freq_khz = 0, widest.max_freq_khz = 0;
    return widest;
  }
  log::info("job {}: {}", j.row.id, j.kernel_note);
  return std::nullopt;
}

void Service::start(JobRecord& j) {
  uint64_t id = j.row.id;
  log::JobScope scope(id);
  if (j.check || reopen_as_owner(j)) return;  // its files are being opened as its owner
  if (!j.manifest) {  // carried on after a restart, or the job was paused before it started
    try {
      j.take_manifest(manifest_from_text(store->manifest(id), cfg.max_entries_per_job));
    } catch (const Refusal& e) {
      return fail(j, e.what());
    } catch (const StoreError& e) {
      return fail(j, e.what());
    }
  }
  xfer::ResolvedOptions setup;
  try {
    setup = xfer::setup_job(j.policy.algorithm, layers(j.policy, j.options));
  } catch (const xfer::OptionError& e) {
    return fail(j, std::string("policy ") + j.policy.name + ": " + e.what());  // the config changed since Submit
  }
  std::string why;
  std::string ca_pem = job_ca(j, &why);
  if (!why.empty()) return fail(j, why);
  std::shared_ptr<const xfer::JobCredentials> creds = j.credentials;
  if (j.policy.has_credentials()) {
    if (j.origins.empty()) j.origins = xfer::manifest_origins(*j.manifest);
    try {
      std::string withheld;
      creds = with_policy_credentials(j.policy, j.credentials, j.origins, j.options.contains("ca_file"), &withheld);
      if (!withheld.empty()) log::warn("job {}: {}", id, withheld);
    } catch (const std::runtime_error& e) {
      return fail(j, std::string("policy ") + j.policy.name + ": " + e.what());
    }
  }

  xfer::RunningJobSpec spec;
  spec.id = uint32_t(id);
  spec.algorithm = j.policy.algorithm;
  spec.tuner = setup.tuner;
  spec.tuner.hla_table = hla_table;  // the one loaded now: a Reload later does not change a running job's
  spec.kernel_range = setup.kernel_config;
  spec.claim = xfer::LinkClaim{0, j.row.uid, setup.cls, setup.weight, 0};
  j.cls = setup.cls;
  j.sla.floor_bps = xfer::job_floor_bps(j.policy.algorithm, setup.tuner);
  j.sla.ceiling_j_per_gb = xfer::job_ceiling_j_per_gb(j.policy.algorithm, setup.tuner);
  spec.job = xfer::Job::Spec{std::move(*j.manifest), j.row.dest, setup.engine, j.dir_fd, {j.row.uid, j.row.gid}};
  j.manifest.reset();
  spec.job.opts.pause_when_full = true;  // a full destination pauses the job until Resume
  spec.job.opts.ca_pem = std::move(ca_pem);
  spec.job.opts.credentials = std::move(creds);
  spec.run.tool = "xferd", spec.run.job_id = int64_t(id), spec.run.policy = j.policy.name;
  spec.run.algorithm = j.policy.algorithm, spec.run.label = j.label;
  spec.run.link_source = cfg.configured("bandwidth_mbps") ? "configured" : "assumed";
  const std::optional<xfer::KernelLayer::Config> kernel = kernel_for(j, setup);
  try {
    j.run = node.run(std::move(spec), history.get(), kernel ? &*kernel : nullptr, &j.kernel_note);
  } catch (const std::invalid_argument& e) {  // the tuner
    return fail(j, std::string("policy ") + j.policy.name + ": " + e.what());
  } catch (const std::exception& e) {  // the Job: its destination
    return fail(j, e.what());
  }
  if (kernel && !j.kernel_note.empty()) log::info("job {}: {}", id, j.kernel_note);
  j.counted.fetched = 0, j.counted.kernel_changes = 0;  // a new run counts from 0
  j.energy_source = node.energy_source();
  follow(j);
  log::info("job {}: started, policy {} ({}){}", id, j.policy.name, j.policy.algorithm,
            j.label.empty() ? std::string() : ", label " + xfer::shown(j.label, 256));
  j.run->start();
}

// What a running job tells the service: each interval (logged, its
// properties announced), its state changes and its end.
void Service::follow(JobRecord& j) {
  JobRecord* jp = &j;
  j.run->on_interval = [this, jp](const xfer::IntervalRecord& r) {
    JobRecord& x = *jp;
    log::JobScope scope(x.row.id);
    const xfer::Observation& o = r.obs;
    x.params = r.decided ? *r.decided : o.params;
    x.throughput_bps = o.throughput_bps;
    x.joules = x.run->loop().joules().value_or(0);
    x.progress = r.progress;
    if (x.kinds.empty())
      for (const xfer::ChunkStatus& c : r.chunks) x.kinds.push_back(xfer::to_string(c.kind));
    std::string ps;
    for (size_t i = 0; i < o.params.chunks.size(); ++i)
      ps += fmt::format("{}{}:{}", ps.empty() ? "" : " ", i < x.kinds.size() ? x.kinds[i] : "?",
                        xfer::to_string(o.params.chunks[i]));
    log::info("job {}: {:.1f} Mbit/s, {}, cores {} | {} | {}", x.row.id, o.throughput_bps / 1e6,
              o.joules ? fmt::format("{:.1f} J", *o.joules) : std::string("no energy figure"),
              o.cores ? std::to_string(*o.cores) : std::string("as they are"), ps, o.params.reason);
    // A job that moves almost nothing (stalled, or a server dripping) while
    // another waits for a slot gives its slot up after a while; it goes on
    // later from where it is.
    const uint64_t now = node.engine().now_us();
    if (x.state == xfer::JobState::Running && o.throughput_bps < kYieldBelowBps && slot_wanted()) {
      if (!x.slow_since_us) {
        x.slow_since_us = now;
      } else if (now - x.slow_since_us >= kYieldAfterUs && !x.yield) {
        log::info("job {}: under {:.0f} kbit/s for {:.0f} s while a job waits for a slot: it yields its slot", x.row.id,
                  kYieldBelowBps / 1e3, double(now - x.slow_since_us) / 1e6);
        x.yield = true;
        sd_event_source_set_enabled(reap_, SD_EVENT_ONESHOT);
      }
    } else {
      x.slow_since_us = 0;
    }
    count_interval(x, r);
    if (on_changed) on_changed(x);
  };
  xfer::Job& job = j.run->job();
  // Queued -> discovering -> running <-> paused, announced as they happen; the
  // end goes through on_finished.
  job.on_state = [this, jp](xfer::JobState st) {
    log::JobScope scope(jp->row.id);
    // A pause the job made itself (a full destination) says why in Error
    // until the job runs again.
    if (st == xfer::JobState::Paused) jp->error = jp->job()->pause_reason();
    if (st == xfer::JobState::Running) jp->error.clear();
    if (st == xfer::JobState::Paused && jp->job()->needs_credentials()) {
      log::warn("job {}: {}; it waits for its owner's SetCredentials (xferctl credentials {})", jp->row.id,
                jp->error, jp->row.id);
      st = xfer::JobState::NeedsCredentials;
      return set_state(*jp, st);
    }
    if (st == xfer::JobState::Discovering || st == xfer::JobState::Running || st == xfer::JobState::Paused)
      set_state(*jp, st);
  };
  job.on_finished = [this, jp] {
    log::JobScope scope(jp->row.id);
    finished(*jp);
  };
}

void Service::finished(JobRecord& j) {
  if (stopping) return;  // a shutdown: the job stays unfinished in the store and carries on at the next start
  j.progress = j.job()->progress();
  xfer::JobState st = j.job()->state();
  nlohmann::json s = j.run->report();
  s["job"] = j.row.id;
  s["policy"] = j.policy.name;
  if (!j.label.empty()) s["label"] = j.label;
  if (!j.kernel_note.empty()) s["kernel"]["note"] = j.kernel_note;
  add_sla(j, s);
  log::event(st == xfer::JobState::Done     ? log::msg::kJobDone
             : st == xfer::JobState::Failed ? log::msg::kJobFailed
                                            : nullptr,
             st == xfer::JobState::Failed ? spdlog::level::warn : spdlog::level::info,
             "job {}: {} ({} of {} files, {} failed){}", j.row.id, xfer::to_string(st), j.progress.files_done,
             j.progress.files_total, j.progress.files_failed,
             j.job()->fatal_error().empty() ? std::string() : ": " + xfer::shown(j.job()->fatal_error(), 4096));
  // The Job is torn down outside its own callback.
  sd_event_source_set_enabled(reap_, SD_EVENT_ONESHOT);
  record_finished(j, st, j.job()->fatal_error(), s.dump());
}

void Service::record_finished(JobRecord& j, xfer::JobState state, const std::string& error, const std::string& summary) {
  log::JobScope scope(j.row.id);
  if (j.finished()) {  // an end is final: a second one (a callback after a cancel) changes nothing
    log::warn("job {}: already {}; a later end ({}) is ignored", j.row.id, xfer::to_string(j.state), xfer::to_string(state));
    return;
  }
  if (j.check) {
    checks.cancel(j.check);
    j.check = 0;
  }
  j.state = state;
  j.error = error;
  j.summary = summary;
  j.credentials.reset();  // wiped now, not when the finished job is forgotten (a running Job's copy goes at retire)
  j.row.finished_at = unix_now();
  counters.add("xferd_jobs_finished_total", {{"policy", j.policy.name}, {"state", xfer::to_string(state)}}, 1);
  if (state == xfer::JobState::Done)
    counters.observe("xferd_job_duration_seconds", {{"policy", j.policy.name}},
                     std::max(0.0, j.row.finished_at - j.row.submitted_at));
  if (j.run) j.run->record_end(xfer::to_string(state));
  if (!j.run) retire(j);  // a running Job is retired after its callback returns
  try {
    store->finish(j.row.id, xfer::to_string(state), error, summary);
  } catch (const StoreError& e) {
    log::error("job {}: {}", j.row.id, e.what());
  }
  if (on_changed) on_changed(j);
  if (on_finished) on_finished(j);
  // From here on the store holds the summary and the manifest; memory keeps
  // only what ListJobs and the properties show.
  j.summary = std::string();
  j.manifest.reset();
  j.names = std::vector<std::string>();
  j.row.manifest = std::string();
  forget_oldest_finished(j.row.uid);
  notify_status();
}

void Service::forget_oldest_finished(uid_t uid) {
  std::vector<uint64_t> finished;
  for (const auto& [id, j] : jobs)
    if (j->row.uid == uid && j->finished() && !j->run) finished.push_back(id);  // ids ascend with age
  if (finished.size() <= size_t(cfg.max_finished_per_user)) return;
  size_t drop = finished.size() - size_t(cfg.max_finished_per_user);
  for (size_t i = 0; i < drop; ++i) {
    try {
      store->forget(finished[i]);
    } catch (const StoreError& e) {
      log::error("job {}: {}", finished[i], e.what());
    }
    jobs.erase(finished[i]);
  }
  log::info("uid {}: forgot the {} oldest finished job(s) (limits.max_finished_per_user = {})", uid, drop,
            cfg.max_finished_per_user);
  malloc_trim(0);
}

namespace {

// bus.cpp refuses another user's call on a job before it gets here; this keeps
// the rule where the operations are, for any other caller of them.
void need_owner(const Caller& c, const JobRecord& j, const char* verb) {
  if (!c.root() && c.uid != j.row.uid)
    throw Refusal(err::kNotOwner,
                  fmt::format("job {} belongs to uid {}; only its owner or root may {} it", j.row.id, j.row.uid, verb));
}

}  // namespace

void Service::cancel(const Caller& c, JobRecord& j) {
  log::JobScope scope(j.row.id);
  need_owner(c, j, "cancel");
  if (j.finished()) throw Refusal(err::kBadState, fmt::format("job {} is already {}", j.row.id, xfer::to_string(j.state)));
  log::info("job {}: cancelled by {}", j.row.id, c.name);
  if (j.run) {
    j.job()->cancel(false);  // its partial files go: a cancelled job's bytes are nobody's
    return;
  }
  remove_partial_files(j);  // queued again (a yield, a resume) or paused: an earlier run's .part files
  record_finished(j, xfer::JobState::Cancelled, "", nlohmann::json{{"state", "cancelled"}, {"job", j.row.id}}.dump());
}

// The .part files (and their progress records) an earlier run of a job that
// is not running now left: removed as a running job's are at Cancel, each
// only when it is its owner's file, unlocked, with a record for the same URL
// (PartFile::discard_leftover). The destination is opened again as the owner
// when the job holds no descriptor of it (it was retired), by a check whose
// answer comes later; the job's end does not wait for it.
void Service::remove_partial_files(JobRecord& j) {
  std::vector<std::pair<std::string, std::string>> files;  // name, url
  try {
    xfer::Manifest m = j.manifest ? *j.manifest : manifest_from_text(store->manifest(j.row.id), cfg.max_entries_per_job);
    for (auto& e : m.entries) files.emplace_back(std::move(e.name), std::move(e.url));
  } catch (const std::exception& e) {
    log::warn("job {}: its partial files are left: the manifest cannot be read: {}", j.row.id, e.what());
    return;
  }
  uint64_t id = j.row.id;
  xfer::FileOwner owner{j.row.uid, j.row.gid};
  auto remove = [id, owner, files = std::move(files)](int dir_fd) {
    log::JobScope scope(id);
    size_t removed = 0;
    for (const auto& [name, url] : files) removed += xfer::PartFile::discard_leftover(dir_fd, name, url, owner);
    if (removed) log::info("job {}: cancelled: removed {} partial file(s)", id, removed);
  };
  if (j.dir_fd >= 0) return remove(j.dir_fd);
  std::string why;
  uint64_t check = checks.start(
      caller_for(j.row.uid, j.row.gid), {{j.row.dest, OpenAs::WritableDirectory}},
      [id, remove](std::vector<int> fds, const std::string& refused, size_t) {
        if (!refused.empty()) {
          log::warn("job {}: its partial files are left: {}", id, refused);
          return;
        }
        remove(fds[0]);
        close(fds[0]);
      },
      &why);
  if (!check) log::warn("job {}: its partial files are left: {}", id, why);
}

void Service::pause(const Caller& c, JobRecord& j) {
  log::JobScope scope(j.row.id);
  need_owner(c, j, "pause");
  if (j.finished() || j.state == xfer::JobState::Paused || j.state == xfer::JobState::NeedsCredentials)
    throw Refusal(err::kBadState, fmt::format("job {} is {}; only a queued or running job can be paused", j.row.id,
                                              xfer::to_string(j.state)));
  if (j.run) {
    if (j.state != xfer::JobState::Running)
      throw Refusal(err::kBadState,
                    fmt::format("job {} is {}; it can be paused once it runs", j.row.id, xfer::to_string(j.state)));
    unseat(j, "paused", false);  // a paused job holds no slot
  } else if (j.check) {  // its files were being opened: again at Resume
    checks.cancel(j.check);
    j.check = 0;
  }
  log::info("job {}: paused by {}", j.row.id, c.name);
  set_state(j, xfer::JobState::Paused);
  start_queued();  // its slot is free
}

void Service::set_credentials(const Caller& c, JobRecord& j, CredentialArgs a) {
  log::JobScope scope(j.row.id);
  need_owner(c, j, "give credentials to");
  if (j.finished()) throw Refusal(err::kBadState, fmt::format("job {} is already {}", j.row.id, xfer::to_string(j.state)));
  if (j.origins.empty()) {  // found when credentials first matter (a restart keeps none)
    try {
      j.origins = xfer::manifest_origins(j.manifest ? *j.manifest
                                                    : manifest_from_text(store->manifest(j.row.id), cfg.max_entries_per_job));
    } catch (const std::exception& e) {
      throw Refusal(err::kInternal, std::string("the job's manifest: ") + e.what());
    }
  }
  auto given = bind_credentials(std::move(a), j.origins);
  UserLimits(cfg).check_secrets(c.name, holdings(c.uid, &j), given->secret_bytes());
  j.credentials = std::move(given);
  j.credentials_kinds = j.credentials->describe();
  log::info("job {}: new credentials from {}: {}", j.row.id, c.name, j.credentials_kinds);
  if (j.run) {
    std::shared_ptr<const xfer::JobCredentials> with = j.credentials;
    if (j.policy.has_credentials()) try {  // the policy's stay, as start() merged them
        with = with_policy_credentials(j.policy, j.credentials, j.origins, j.options.contains("ca_file"), nullptr);
      } catch (const std::runtime_error& e) {
        throw Refusal(err::kInternal, std::string("policy ") + j.policy.name + ": " + e.what());
      }
    j.job()->set_credentials(std::move(with));
  }
  if (j.state != xfer::JobState::NeedsCredentials) return;
  j.error.clear();
  if (j.run) {
    j.job()->resume();  // announces running through on_state
  } else {
    set_state(j, xfer::JobState::Queued);
    j.queued_seq = ++next_seq_;
    start_queued();
  }
}

void Service::resume(const Caller& c, JobRecord& j) {
  log::JobScope scope(j.row.id);
  need_owner(c, j, "resume");
  if (j.state == xfer::JobState::NeedsCredentials)
    throw Refusal(err::kBadState, fmt::format("job {} waits for credentials: give them (SetCredentials; xferctl "
                                              "credentials {}), and it goes on",
                                              j.row.id, j.row.id));
  if (j.state != xfer::JobState::Paused)
    throw Refusal(err::kBadState, fmt::format("job {} is {}, not paused", j.row.id, xfer::to_string(j.state)));
  log::info("job {}: resumed by {}", j.row.id, c.name);
  if (!j.run && !j.credentials_kinds.empty() && !j.credentials) {  // paused across a restart: its credentials are gone
    j.error = "xferd restarted and keeps no credentials: give them again (SetCredentials; xferctl credentials " +
              std::to_string(j.row.id) + "); it had: " + j.credentials_kinds;
    return set_state(j, xfer::JobState::NeedsCredentials);
  }
  if (j.run) {
    // Announces Running through on_state, and may end the job at once (its
    // last file was checked while it was paused): nothing is set after it.
    j.job()->resume();
  } else {
    set_state(j, xfer::JobState::Queued);
    j.queued_seq = ++next_seq_;
    start_queued();
  }
}

std::string Service::reload() {
  try {
    Config c = load_config(opts.config, opts.config_dir);
    if (!opts.state_dir.empty()) c.state_dir = opts.state_dir;
    xfer::PowerCoefficients model = xfer::load_power_model(c.text("power_model"));  // read again: it may be recalibrated
    // The metrics endpoint is opened at start: a change waits for the next one, and says so.
    if (c.metrics_listen != cfg.metrics_listen || c.metrics_textfile != cfg.metrics_textfile ||
        c.metrics_textfile_interval_s != cfg.metrics_textfile_interval_s)
      log::warn("reload: [metrics] changed; it takes effect when xferd starts again (systemctl restart xferd)");
    cfg = std::move(c);
    node.machine().replace_meter(xfer::make_energy_meter(model, xfer::EnergyScope::Machine));
  } catch (const std::runtime_error& e) {  // ConfigError, or the model file changed meanwhile
    log::error("reload: {}; the configuration in use is kept", e.what());
    return e.what();
  }
  xfer::log::set_level(cfg.log_level);
  log::info("reload: {} policies from {} file(s)", cfg.policies.size(), cfg.files.size());
  apply_link_config();
  if (std::string why = load_hla_table(); !why.empty()) return why;
  start_queued();
  return "";
}

void Service::restore_jobs() {
  for (JobRow& r : store->jobs()) {  // without manifests and summaries: those are read one job at a time
    auto j = std::make_unique<JobRecord>();
    j->service = this;
    j->options = nlohmann::json::parse(r.options, nullptr, false);
    if (j->options.is_discarded()) j->options = nlohmann::json::object();
    j->label = j->options.value("label", "");
    if (j->options.contains("credentials")) {  // which kinds it had: the credentials themselves were never stored
      j->credentials_kinds = j->options["credentials"].is_string() ? j->options["credentials"].get<std::string>() : "?";
      j->options.erase("credentials");
    }
    auto p = cfg.policies.find(r.policy);
    j->policy = p != cfg.policies.end() ? p->second : Policy{};
    j->policy.name = r.policy;
    // Unfinished jobs start again from the queue; a state the store should
    // not hold (a damaged row) fails the job rather than guess.
    std::optional<xfer::JobState> stored = xfer::job_state_from(r.state);
    j->state = !stored ? xfer::JobState::Failed
               : *stored == xfer::JobState::Running ? xfer::JobState::Queued
                                                    : *stored;
    j->error = stored ? r.error : "the job store holds an unknown state '" + xfer::printable(r.state) + "'";
    j->row = std::move(r);
    JobRecord& e = *j;
    jobs[e.row.id] = std::move(j);
    if (!e.finished()) {
      struct stat st;
      if (stat(e.row.dest.c_str(), &st) == 0) e.dest = {st.st_dev, st.st_ino};  // for name clashes until it starts
      try {
        e.take_manifest(manifest_from_text(store->manifest(e.row.id), cfg.max_entries_per_job));
      } catch (const std::exception&) {
        // start() reads it again and fails the job with the reason
      }
      e.queued_seq = ++next_seq_;
      if (p != cfg.policies.end()) {
        try {
          xfer::ResolvedOptions setup = xfer::setup_job(e.policy.algorithm, layers(e.policy, e.options));
          e.cls = setup.cls;
          e.sla.floor_bps = xfer::job_floor_bps(e.policy.algorithm, setup.tuner);
        } catch (const xfer::OptionError&) {
          // start() sets it up again and fails the job with the reason
        }
      }
      if (p == cfg.policies.end()) {
        fail(e, "policy '" + e.row.policy + "' is no longer in the configuration");
      } else if (!e.credentials_kinds.empty() && e.state != xfer::JobState::Paused) {
        // Secrets are not kept across a restart (no key to encrypt them at
        // rest is trusted more than their owner): the owner gives them again.
        e.error = "xferd restarted and keeps no credentials: give them again (SetCredentials; xferctl credentials " +
                  std::to_string(e.row.id) + "); it had: " + e.credentials_kinds;
        set_state(e, xfer::JobState::NeedsCredentials);
        log::info("job {}: carried on after a restart; waits for its owner to give its credentials again ({})",
                  e.row.id, e.credentials_kinds);
      } else {
        log::info("job {}: carried on after a restart ({})", e.row.id, xfer::to_string(e.state));
      }
    } else {
      nlohmann::json s = nlohmann::json::parse(store->summary(e.row.id), nullptr, false);
      if (s.is_object()) {
        // The summary's own names (Job::summary()).
        auto count = [&](const char* k) { return s[k].is_number_unsigned() ? s[k].get<uint64_t>() : uint64_t(0); };
        e.progress.files_total = count("files");
        e.progress.files_done = count("files_ok");
        e.progress.files_skipped = count("files_skipped");
        e.progress.files_failed = count("files_failed");
        e.progress.bytes_total = count("bytes");
        e.progress.bytes_done = count("bytes_fetched") + count("bytes_resumed");
        if (s["energy"].is_object()) {
          e.joules = s["energy"].value("joules", 0.0);
          e.energy_source = s["energy"].value("source", "");
        }
      }
    }
  }
  malloc_trim(0);
  start_queued();
}

void Service::shutdown() {
  stopping = true;
  for (auto& [id, j] : jobs)
    if (j->run) {
      log::info("job {}: stopping for a daemon restart; progress saved, it carries on at the next start", id);
      j->job()->cancel(true);  // checkpoints every .part; on_finished ignores it (stopping)
      j->run->record_end("interrupted");  // the next start is a new run
      retire(*j);
    }
}

void Service::purge_old() {
  double before = unix_now() - cfg.keep_finished_days * 86400;
  try {
    int n = store->purge_finished_before(before);
    if (n > 0) log::info("purged {} finished job(s) older than {} days", n, cfg.keep_finished_days);
  } catch (const StoreError& e) {
    log::error("{}", e.what());
  }
  for (auto it = jobs.begin(); it != jobs.end();)
    if (it->second->finished() && !it->second->run && it->second->row.finished_at > 0 && it->second->row.finished_at < before)
      it = jobs.erase(it);
    else
      ++it;
}

void Service::notify_status() {
  std::string s = status_line();
  if (s == last_status_) return;
  last_status_ = s;
  sd_notifyf(0, "STATUS=%s", s.c_str());
}

std::string Service::status_line() const {
  size_t run = 0, queued = 0, paused = 0;
  for (const auto& [id, j] : jobs) {
    if (j->run && j->state != xfer::JobState::Paused) ++run;
    else if (j->state == xfer::JobState::Queued) ++queued;
    else if (j->state == xfer::JobState::Paused) ++paused;
  }
  return fmt::format("{} running, {} queued, {} paused", run, queued, paused);
}

}  // namespace xferd
