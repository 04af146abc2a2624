// xferctl: the command line of xferd. submit, status, list, cancel, pause,
// resume, watch, policies and history talk to the daemon (client.cpp); `run`
// carries out a job in-process, without the daemon (scripts, benchmarks), on
// the same Job code the daemon runs.
#include <pwd.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <fmt/format.h>
#include <fstream>
#include <iostream>
#include <sstream>

#include "client.h"
#include "credentials.h"
#include "paths.h"
#include "progress.h"
#include "xfer/calibration_run.h"
#include "xfer/control_loop.h"
#include "xfer/energy.h"
#include "xfer/engine.h"
#include "xfer/history.h"
#include "xfer/hla.h"
#include "xfer/kernel.h"
#include "xfer/log.h"
#include "xfer/manifest.h"
#include "xfer/options.h"
#include "xfer/running_job.h"
#include "xfer/safe_open.h"
#include "xfer/text.h"
#include "xfer/tuner.h"

namespace {

enum Exit { kOk = 0, kSomeFailed = 1, kUsage = 2, kFatal = 3, kInterrupted = 130 };

sigset_t stop_signals() {
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGINT);
  sigaddset(&mask, SIGTERM);
  return mask;
}

// SIGINT/SIGTERM become events to wait for, not deaths: block them before
// changing anything that must be restored.
void block_stop_signals() {
  sigset_t mask = stop_signals();
  sigprocmask(SIG_BLOCK, &mask, nullptr);
}

// Waits up to `ms` for SIGINT/SIGTERM (blocked beforehand); true when one came.
bool wait_signal(int ms) {
  sigset_t mask = stop_signals();
  timespec ts{ms / 1000, (ms % 1000) * 1000000L};
  return sigtimedwait(&mask, nullptr, &ts) > 0;
}


// The paths xferctl run gives the options the table leaves unset.
xfer::OptionValues path_defaults() {
  return {{"kernel_state", xferd::kKernelState}, {"power_model", xferd::kPowerModel}};
}

struct RunArgs {
  std::string manifest, dest, sla, log_level = "warn";
  bool json = false, no_progress = false;
  // Every other flag is an option of xfer::option_table() (scope kRun),
  // checked by the table as it is read.
  xfer::OptionValues options = xfer::OptionValues::object();
  xferctl::CredentialFlags credentials;
};

// A postgresql:// history's local journal unless --history-journal says:
// $XDG_STATE_HOME/xferd/history.db, else the user's home (passwd when HOME
// is unset) /.local/state/xferd/history.db; never a shared directory such as
// /tmp, where another user could plant the name first.
std::string default_journal() {
  const char* xdg = getenv("XDG_STATE_HOME");
  std::string base;
  if (xdg && *xdg) base = xdg;
  else {
    const char* home = getenv("HOME");
    std::string h = home && *home ? home : "";
    if (h.empty())
      if (const passwd* pw = getpwuid(geteuid()); pw && pw->pw_dir && *pw->pw_dir) h = pw->pw_dir;
    if (h.empty() || h == "/")
      throw std::runtime_error("no home directory for the history journal (HOME and passwd say none): name one with "
                               "--history-journal");
    base = h + "/.local/state";
  }
  std::string dir = base + "/xferd";
  for (size_t i = 1; i <= dir.size(); ++i)
    if (i == dir.size() || dir[i] == '/') mkdir(dir.substr(0, i).c_str(), 0700);
  return dir + "/history.db";
}

void raise_fd_limit() {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
}



// What `xferctl run` reads and checks before it fetches anything: a bad
// manifest, option, table, CA file or history is a usage error with nothing
// fetched.
struct RunInputs {
  xfer::Manifest manifest;
  std::string policy;
  xfer::ResolvedOptions setup;
  std::string table_path;
  std::shared_ptr<const xfer::hla::ParamTable> table;
  std::unique_ptr<xfer::hla::History> history;
};

int prepare(const RunArgs& a, RunInputs& in) {
  try {
    in.manifest = xfer::load_manifest(a.manifest);
  } catch (const xfer::ManifestError& e) {
    fmt::print(stderr, "xferctl: manifest rejected, nothing fetched:\n{}\n", e.what());
    return kUsage;
  }
  const xfer::OptionValues& o = a.options;
  bool fixed = o.contains("cc") || o.contains("p") || o.contains("pp");
  in.policy = a.sla.empty() ? (fixed ? "static" : "min-energy") : a.sla;
  xfer::OptionLayers layers;
  layers.defaults = path_defaults();
  layers.job = o;
  layers.job_scope = xfer::kRun;
  try {
    in.setup = xfer::setup_job(in.policy, layers);
  } catch (const std::invalid_argument& e) {  // OptionError
    fmt::print(stderr, "xferctl: {}\n", e.what());
    return kUsage;
  }
  const xfer::OptionValues& v = in.setup.values;
  // The parameter table from xfer-hla analyze, when given.
  in.table_path = v.value("hla_table", std::string());
  if (!in.table_path.empty()) {
    try {
      in.table = std::make_shared<const xfer::hla::ParamTable>(xfer::hla::load_table(in.table_path));
    } catch (const std::exception& e) {
      fmt::print(stderr, "xferctl: --hla-table: {}; nothing fetched\n", xfer::printable(e.what()));
      return kUsage;
    }
    xfer::log::info("hla table: {}: {}", in.table_path, xfer::hla::describe(*in.table));
  }
  in.setup.tuner.hla_table = in.table;
  if (a.credentials.any()) {
    try {
      in.setup.engine.credentials = xferctl::local_credentials(a.credentials, xfer::manifest_origins(in.manifest));
    } catch (const std::runtime_error& e) {
      fmt::print(stderr, "xferctl: {}\n", xfer::printable(e.what()));
      return kUsage;
    }
  }
  if (v.contains("ca_file")) {
    std::string ca_file = v["ca_file"].get<std::string>();
    std::string& pem = in.setup.engine.ca_pem;
    try {
      pem = xfer::read_small_file(ca_file, 1 << 20, "file of PEM certificates");
    } catch (const std::exception& e) {
      fmt::print(stderr, "xferctl: --ca-file: {}\n", xfer::printable(e.what()));
      return kUsage;
    }
    if (!xfer::has_pem_certificate(pem)) {
      fmt::print(stderr, "xferctl: --ca-file {}: not a file of PEM certificates\n", xfer::printable(ca_file));
      return kUsage;
    }
  }
  // The transfer history, when asked for: a path or a postgresql:// URL
  // (journaled locally first; a server that is away delays no transfer).
  if (v.contains("history")) {
    xfer::hla::HistoryOptions ho;
    ho.journal = v.value("history_journal", std::string());
    try {
      if (ho.journal.empty() && xfer::hla::is_postgres_url(v["history"].get<std::string>())) ho.journal = default_journal();
      in.history = xfer::hla::open_history(v["history"].get<std::string>(), ho);
    } catch (const std::exception& e) {
      fmt::print(stderr, "xferctl: --history: {}; nothing fetched\n", xfer::printable(e.what()));
      return kUsage;
    }
  }
  return kOk;
}

// The progress bar on stderr, redrawn every 250 ms while the loop runs.
struct ProgressDisplay {
  xfer::Job* job;
  xferctl::ProgressBar bar;
  void attach(sd_event* loop) {
    sd_event_add_time_relative(
        loop, nullptr, CLOCK_MONOTONIC, 0, 50000,
        [](sd_event_source* s, uint64_t, void* ud) {
          auto* d = static_cast<ProgressDisplay*>(ud);
          std::vector<xferctl::ChunkKnobs> knobs;
          for (const xfer::ChunkStatus& c : d->job->chunks())
            knobs.push_back({xfer::to_string(c.kind), c.params.cc, c.params.p, c.params.pp});
          d->bar.draw(d->job->progress(), xferctl::params_in_words(knobs));
          sd_event_source_set_time_relative(s, 250000);
          sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
          return 0;
        },
        this);
  }
};

// The job, on the loop, with the shared parts (flow monitor, machine, kernel
// layer, history); its result printed. Returns the exit code.
int transfer(const RunArgs& a, RunInputs& in, sd_event* loop) {
  const xfer::OptionValues& v = in.setup.values;
  std::unique_ptr<xfer::FlowMonitor> monitor;
  // eBPF is loaded on a thread (signals are blocked by now, so it takes
  // none): at once for --flows ebpf, once the job has run kEbpfAfter for auto.
  constexpr std::chrono::milliseconds kEbpfAfter{2000};
  if (v["flows"] == "tcp_info")
    monitor = xfer::make_flow_monitor(false);
  else if (v["flows"] != "off")
    monitor = xfer::make_flow_monitor_deferred(true, v["flows"] == "ebpf" ? std::chrono::milliseconds{0} : kEbpfAfter);
  std::unique_ptr<xfer::Machine> machine;
  try {
    machine = xfer::make_machine(xfer::load_power_model(v["power_model"].get<std::string>()),
                                 v["energy_scope"] == "process" ? xfer::EnergyScope::Process : xfer::EnergyScope::Machine);
  } catch (const std::exception& e) {
    fmt::print(stderr, "xferctl: {}\n", e.what());
    return kUsage;
  }
  // The transfer goes on without the kernel layer when it cannot have it
  // (someone else's journal, or this user may not keep one), and says so.
  // It restores cores and frequency when it goes, after the job.
  std::string kernel_note = in.setup.kernel ? "" : "--kernel off";
  std::unique_ptr<xfer::KernelLayer> kernel;
  if (in.setup.kernel) {
    kernel = xfer::open_kernel_layer(in.setup.kernel_config, &kernel_note);
    if (!kernel) xfer::log::warn("{}", kernel_note);
  }
  xfer::Engine engine(loop);
  xfer::RunningJobSpec spec;
  spec.algorithm = in.policy;
  spec.tuner = in.setup.tuner;
  spec.kernel = kernel.get();
  spec.job = xfer::Job::Spec{std::move(in.manifest), a.dest, in.setup.engine};
  spec.run.tool = "xferctl", spec.run.job_id = getpid(), spec.run.policy = in.policy, spec.run.algorithm = in.policy;
  spec.run.link_source = a.options.contains("bandwidth_mbps") ? "configured" : "assumed";
  if (v.contains("loss_pct")) spec.run.loss_pct = v["loss_pct"].get<double>();
  if (v.contains("label")) spec.run.label = v["label"].get<std::string>();
  std::unique_ptr<xfer::RunningJob> running;
  try {
    running = std::make_unique<xfer::RunningJob>(engine, std::move(spec),
                                                 xfer::SharedParts{monitor.get(), machine.get(), in.history.get()});
  } catch (const std::invalid_argument& e) {  // an unknown --sla
    fmt::print(stderr, "xferctl: {}\n", e.what());
    return kUsage;
  } catch (const std::exception& e) {
    fmt::print(stderr, "xferctl: {}; nothing fetched\n", e.what());
    return kFatal;
  }
  xfer::Job* job = &running->job();
  bool interrupted = false;
  job->on_finished = [&] { sd_event_exit(loop, 0); };
  auto on_signal = [](sd_event_source*, const signalfd_siginfo*, void* ud) {
    auto* st = static_cast<std::pair<xfer::Job*, bool*>*>(ud);
    *st->second = true;
    st->first->cancel();  // progress records are written; run again to resume
    return 0;
  };
  std::pair<xfer::Job*, bool*> sigstate{job, &interrupted};
  sd_event_add_signal(loop, nullptr, SIGINT, on_signal, &sigstate);
  sd_event_add_signal(loop, nullptr, SIGTERM, on_signal, &sigstate);
  ProgressDisplay display{job, {}};
  bool show_bar = !a.no_progress && isatty(STDERR_FILENO);
  if (show_bar) display.attach(loop);

  running->start();
  if (job->state() == xfer::JobState::Discovering || job->state() == xfer::JobState::Running) sd_event_loop(loop);
  if (show_bar) display.bar.finish();

  nlohmann::json s = running->report();
  if (!kernel_note.empty()) s["kernel"]["note"] = kernel_note;
  if (in.table)
    s["hla_table"] = {{"file", in.table_path}, {"strata", in.table->strata.size()}, {"version", in.table->version},
                      {"loaded", xfer::hla::describe(*in.table)}};
  if (a.json) std::cout << s.dump(2) << std::endl;
  else xferctl::print_result(s);
  int rc = kOk;
  if (interrupted) {
    fmt::print(stderr, "xferctl: interrupted; progress saved, run the same command again to resume\n");
    rc = kInterrupted;
  } else if (job->state() == xfer::JobState::Failed) {
    rc = kFatal;
  } else if (!job->failed().empty()) {
    rc = kSomeFailed;
  }
  running->record_end(interrupted ? "cancelled" : xfer::to_string(job->state()));
  if (in.history && !in.history->flush(5))
    fmt::print(stderr, "xferctl: history: {} rows wait in the journal of {} ({}); they go at the next run\n",
               in.history->unshipped(), in.history->where(), xfer::printable(in.history->ship_error()));
  running.reset();  // the loop, the recorder, the Job; then the kernel layer restores
  return rc;
}

int run(const RunArgs& a) {
  xfer::log::set_level(a.log_level);
  raise_fd_limit();
  RunInputs in;
  if (int rc = prepare(a, in); rc != kOk) return rc;
  sd_event* loop = nullptr;
  sd_event_new(&loop);
  block_stop_signals();  // sd-event receives them
  int rc = transfer(a, in, loop);
  sd_event_unref(loop);
  return rc;
}

// xferctl energy: the source and a reading every second until interrupted.
int energy(const std::string& model_path, int count) {
  block_stop_signals();
  std::unique_ptr<xfer::EnergyMeter> meter;
  try {
    meter = xfer::make_energy_meter(xfer::load_power_model(model_path));
  } catch (const std::exception& e) {
    fmt::print(stderr, "xferctl: {}\n", e.what());
    return kUsage;
  }
  fmt::print("energy source: {} ({})\n", meter->source(), meter->measured() ? "measured" : "modelled, not measured");
  meter->sample();
  for (int i = 0; count == 0 || i < count; ++i) {
    if (wait_signal(1000)) break;
    xfer::EnergySample s = meter->sample();
    fmt::print("{:>6.1f} W  dynamic {:>6.1f} W  | {:>9.1f} J total, {:>9.1f} J dynamic since start  [{}]\n", s.watts,
               s.dynamic_watts, s.total_joules, s.total_dynamic_joules, s.source);
    std::fflush(stdout);
  }
  return kOk;
}

// xferctl calibrate: needs RAPL; fits the model's coefficients to this machine.
int calibrate(const std::string& out) {
  try {
    xfer::RaplMeter probe;
  } catch (const std::exception& e) {
    fmt::print(stderr,
               "xferctl calibrate: {}. Calibration fits the power model to measured power, and this machine has "
               "no measured source; the model keeps its documented defaults.\n",
               e.what());
    return kFatal;
  }
  return xfer::run_calibration(out, xferd::kKernelState) ? kOk : kFatal;
}

// xferctl kernel: set cores / frequency (journalled), hold until a signal, restore.
int kernel(int cores, unsigned long freq, bool hold, bool restore_only, const std::string& state, const std::string& mode) {
  block_stop_signals();
  std::unique_ptr<xfer::KernelJournal> owned;
  try {
    if (restore_only) {
      bool had = xfer::KernelJournal::restore_leftover(state);
      fmt::print("{}\n", had ? "restored the kernel state a previous run left" : "nothing to restore");
      return kOk;
    }
    owned = std::make_unique<xfer::KernelJournal>(state);  // restores a leftover first
  } catch (const std::exception& e) {
    fmt::print(stderr, "xferctl kernel: {}\n", e.what());
    return kFatal;
  }
  xfer::KernelJournal& journal = *owned;
  try {
    if (cores > 0) {
      xfer::CoreControl::Config cfg;
      cfg.mode = mode == "affinity" ? xfer::CoreControl::Mode::Affinity : xfer::CoreControl::Mode::Hotplug;
      xfer::CoreControl cc(cfg, journal);
      cc.set_online(cores);
      fmt::print("cores online: {}\n", cc.online());
    }
    if (freq > 0) {
      xfer::FreqControl fc(journal);
      fmt::print("frequency set to {} kHz ({})\n", freq, fc.set_khz(freq));
    }
  } catch (const std::exception& e) {
    fmt::print(stderr, "xferctl kernel: {}\n", e.what());
    return kFatal;  // the journal restores what was changed
  }
  std::fflush(stdout);
  if (hold)
    while (!wait_signal(1000)) {
    }
  return kOk;  // ~KernelJournal restores
}

}  // namespace

int main(int argc, char** argv) {
  xfer::log::to_stderr();
  CLI::App app{"xferctl: bulk HTTP(S) transfers tuned for throughput and energy"};
  app.require_subcommand(1);
  RunArgs ra;
  CLI::App* run_cmd = app.add_subcommand("run", "run a transfer job in this process, without the daemon");
  run_cmd->add_option("--manifest", ra.manifest, "manifest: one 'URL [SIZE] [sha256:HEX]' a line")->required();
  run_cmd->add_option("--dest", ra.dest, "destination directory")->required();
  std::string policies;
  for (const auto& e : xfer::tuner_registry()) policies += (policies.empty() ? "" : ", ") + e.name;
  run_cmd->add_option("--sla", ra.sla, "SLA policy (" + policies + "); default min-energy, or static with --cc/--p/--pp");
  // Shown in the help: the table's defaults and this front end's paths.
  xfer::OptionValues run_defaults = path_defaults();
  for (const xfer::OptionSpec& o : xfer::option_table())
    if (!o.def.is_null()) run_defaults[o.name] = o.def;
  xferctl::add_table_flags(run_cmd, xfer::kRun, ra.options, &run_defaults);
  xferctl::add_credential_flags(run_cmd, ra.credentials);
  run_cmd->add_flag("--json", ra.json, "print one JSON object with the result");
  run_cmd->add_flag("--no-progress", ra.no_progress, "no progress bar");
  run_cmd->add_option("--log-level", ra.log_level, "debug, info, warn, error")->check(CLI::IsMember({"debug", "info", "warn", "error", "off"}));

  std::string model_path = xferd::kPowerModel;
  int energy_count = 0;
  CLI::App* energy_cmd = app.add_subcommand("energy", "print the energy source and a reading every second");
  energy_cmd->add_option("--model", model_path, "power model coefficients (TOML), e.g. from xferctl calibrate");
  energy_cmd->add_option("--count", energy_count, "stop after this many readings (default: until interrupted)");
  std::string calib_out = xferd::kPowerModel;
  CLI::App* calib_cmd = app.add_subcommand("calibrate", "fit the power model to this machine (needs RAPL)");
  calib_cmd->add_option("--out", calib_out, "where the coefficients go");
  int k_cores = 0;
  unsigned long k_freq = 0;
  bool k_hold = false, k_restore = false;
  std::string k_state = xferd::kKernelState, k_mode = "hotplug";
  CLI::App* kernel_cmd = app.add_subcommand("kernel", "set online cores / CPU frequency (restored on exit)");
  kernel_cmd->add_option("--cores", k_cores, "online CPUs")->check(CLI::Range(1, 4096));
  kernel_cmd->add_option("--freq-khz", k_freq, "CPU frequency");
  kernel_cmd->add_option("--mode", k_mode, "hotplug or affinity")->check(CLI::IsMember({"hotplug", "affinity"}));
  kernel_cmd->add_flag("--hold", k_hold, "keep the setting until SIGINT/SIGTERM, then restore");
  kernel_cmd->add_flag("--restore", k_restore, "only restore what a crashed run left");
  kernel_cmd->add_option("--state-file", k_state, "journal of original values");
  std::function<int()> client = xferctl::add_client_commands(app);
  // Bad flags and bad values exit 2, as the README says (CLI11's own codes,
  // 105 for a value a check refuses, mean nothing to a caller); --help 0.
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? kOk : kUsage;
  }
  if (int rc = client(); rc >= 0) return rc;
  if (*run_cmd) return run(ra);
  if (*energy_cmd) return energy(model_path, energy_count);
  if (*calib_cmd) return calibrate(calib_out);
  if (*kernel_cmd) return kernel(k_cores, k_freq, k_hold, k_restore, k_state, k_mode);
  return kUsage;
}
