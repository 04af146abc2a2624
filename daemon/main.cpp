// xferd: the transfer daemon. One sd-event loop drives the bus, libcurl, every
// job's control loop, signals and the watchdog.
#include <signal.h>
#include <unistd.h>
#include <sys/resource.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-daemon.h>
#include <systemd/sd-event.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <fmt/format.h>

#include "bus.h"
#include "config.h"
#include "metrics_server.h"
#include "service.h"
#include "xfer/credentials.h"
#include "xfer/hla.h"
#include "xfer/log.h"
#include "xfer/text.h"

namespace {

namespace log = xfer::log;

std::string g_sink;  // "journal" or "stderr"

struct Args {
  std::string config = xferd::kConfigFile, config_dir = xferd::kConfigDir;
  std::string state_dir, bus_address, log_level;
  bool check_config = false;
};

int fail(const std::string& what) {
  log::error("{}", what);
  if (g_sink != "stderr") fmt::print(stderr, "xferd: {}\n", what);
  sd_notifyf(0, "STATUS=%s", what.c_str());
  return 1;
}

sd_bus* open_bus(const std::string& address) {
  sd_bus* bus = nullptr;
  int r;
  if (address.empty()) {
    r = sd_bus_open_system(&bus);  // DBUS_SYSTEM_BUS_ADDRESS when set
  } else {
    r = sd_bus_new(&bus);
    if (r >= 0) r = sd_bus_set_address(bus, address.c_str());
    if (r >= 0) r = sd_bus_set_bus_client(bus, 1);
    if (r >= 0) r = sd_bus_start(bus);
  }
  if (r < 0) {
    sd_bus_unref(bus);
    const char* env = getenv("DBUS_SYSTEM_BUS_ADDRESS");
    throw std::runtime_error(fmt::format("cannot connect to the bus at {}: {}",
                                         !address.empty() ? address : env ? env : "the system bus", strerror(-r)));
  }
  return bus;
}

// The metrics endpoint and textfile ([metrics] in xferd.conf), and the
// socket systemd passes (xferd-metrics.socket); null when none is asked for.
std::unique_ptr<xferd::MetricsServer> open_metrics(sd_event* loop, xferd::Service& s) {
  auto m = std::make_unique<xferd::MetricsServer>(loop, [&s] { return s.scrape(); });
  char** names = nullptr;
  int n = sd_listen_fds_with_names(1, &names);
  for (int i = 0; i < n; ++i) {
    int fd = SD_LISTEN_FDS_START + i;
    if (names && std::string(names[i]) == "metrics") {
      m->serve(fd, "the socket systemd passed (xferd-metrics.socket)");
    } else {
      log::warn("systemd passed a socket named {} that xferd does not use: closed", names ? xfer::printable(names[i]) : "?");
      close(fd);
    }
  }
  if (names) {
    for (int i = 0; i < n; ++i) free(names[i]);
    free(names);
  }
  if (!s.cfg.metrics_listen.empty()) m->listen(s.cfg.metrics_listen);
  if (!s.cfg.metrics_textfile.empty()) m->textfile(s.cfg.metrics_textfile, s.cfg.metrics_textfile_interval_s);
  if (m->endpoints().empty()) return nullptr;
  return m;
}

// What the start refuses beyond the configuration's own checks (load_config:
// keys, values, the power model), without creating, binding or writing
// anything: --check-config runs it, and so does the start before the service
// is built, so the two never disagree. Throws std::runtime_error.
void start_checks(const xferd::Config& cfg, const Args& a) {
  xferd::Service::check_state_dir(a.state_dir.empty() ? cfg.state_dir : a.state_dir);
  if (!cfg.metrics_textfile.empty()) xferd::MetricsServer::check_textfile(cfg.metrics_textfile);
}

int run(const Args& a) {
  xferd::Config cfg;
  try {
    cfg = xferd::load_config(a.config, a.config_dir);
  } catch (const xferd::ConfigError& e) {
    return fail(std::string("configuration: ") + e.what() + "; not started");
  }
  try {
    start_checks(cfg, a);
  } catch (const std::exception& e) {
    return fail(std::string(e.what()) + "; not started");
  }
  if (a.check_config) {
    // The parameter table the daemon would load at start, read the same way.
    if (std::string table = cfg.text("hla_table"); !table.empty()) {
      try {
        xfer::hla::ParamTable t = xfer::hla::load_table(table);
        fmt::print("parameter table {}: {}\n", xfer::printable(table), xfer::printable(xfer::hla::describe(t)));
      } catch (const std::exception& e) {
        return fail(std::string("[hla] table: ") + xfer::printable(e.what()));
      }
    }
    fmt::print("configuration OK: {} policies from {}\n", cfg.policies.size(),
               cfg.files.empty() ? std::string("built-in defaults") : fmt::format("{}", fmt::join(cfg.files, ", ")));
    return 0;
  }
  log::set_level(a.log_level.empty() ? cfg.log_level : a.log_level);
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
  sigset_t mask;
  sigemptyset(&mask);
  for (int s : {SIGTERM, SIGINT, SIGHUP}) sigaddset(&mask, s);
  sigprocmask(SIG_BLOCK, &mask, nullptr);
  signal(SIGPIPE, SIG_IGN);
  xfer::protect_process_memory();  // it will hold its callers' credentials: no core file, no ptrace by uid

  sd_event* loop = nullptr;
  sd_event_default(&loop);
  sd_event_set_watchdog(loop, true);  // WATCHDOG=1 at half of WatchdogSec, when systemd asks for it
  int rc = 0;
  {
    xferd::Options o{a.config, a.config_dir, a.state_dir};
    std::unique_ptr<xferd::Service> service;
    std::unique_ptr<xferd::MetricsServer> metrics;
    sd_bus* bus = nullptr;
    try {
      service = std::make_unique<xferd::Service>(loop, o, cfg);
      metrics = open_metrics(loop, *service);
      bus = open_bus(a.bus_address);
    } catch (const std::exception& e) {
      metrics.reset();
      service.reset();
      sd_event_unref(loop);
      return fail(e.what());
    }
    int r = xferd::bus_register(*service, bus);
    if (r >= 0) r = sd_bus_attach_event(bus, loop, SD_EVENT_PRIORITY_NORMAL);
    if (r >= 0) {
      r = sd_bus_request_name(bus, xferd::kBusName, 0);
      if (r == -EEXIST) {
        rc = fail(fmt::format("{} is already owned on this bus: another xferd runs", xferd::kBusName));
        r = 0;
      } else if (r == -EACCES) {
        rc = fail(fmt::format("the bus policy does not let this user own {} (install systemd/org.xferd.Xferd1.conf "
                              "into /usr/share/dbus-1/system.d/)",
                              xferd::kBusName));
        r = 0;
      }
    }
    if (r < 0) rc = fail(fmt::format("D-Bus: {}", strerror(-r)));
    if (rc == 0) {
      auto on_stop = [](sd_event_source* s, const signalfd_siginfo* si, void* ud) {
        auto* svc = static_cast<xferd::Service*>(ud);
        log::info("signal {}: stopping; unfinished jobs carry on at the next start", si->ssi_signo);
        sd_notify(0, "STOPPING=1");
        svc->shutdown();
        return sd_event_exit(sd_event_source_get_event(s), 0);
      };
      sd_event_add_signal(loop, nullptr, SIGTERM, on_stop, service.get());
      sd_event_add_signal(loop, nullptr, SIGINT, on_stop, service.get());
      sd_event_add_signal(
          loop, nullptr, SIGHUP,
          [](sd_event_source*, const signalfd_siginfo*, void* ud) {
            sd_notify(0, "RELOADING=1");
            static_cast<xferd::Service*>(ud)->reload();
            sd_notify(0, "READY=1");
            return 0;
          },
          service.get());
      // Finished jobs older than keep_finished_days go, hourly.
      sd_event_add_time_relative(
          loop, nullptr, CLOCK_MONOTONIC, 0, 0,
          [](sd_event_source* s, uint64_t, void* ud) {
            static_cast<xferd::Service*>(ud)->purge_old();
            sd_event_source_set_time_relative(s, 3600ULL * 1000000);
            return sd_event_source_set_enabled(s, SD_EVENT_ON);
          },
          service.get());
      service->restore_jobs();
      log::info("xferd {} ready on {}: {} policies, state in {}, {} jobs kept", XFERD_VERSION,
                a.bus_address.empty() ? "the system bus" : a.bus_address, service->cfg.policies.size(),
                a.state_dir.empty() ? service->cfg.state_dir : a.state_dir, service->jobs.size());
      sd_notifyf(0, "READY=1\nSTATUS=%s", service->status_line().c_str());
      r = sd_event_loop(loop);
      if (r < 0) rc = fail(fmt::format("event loop: {}", strerror(-r)));
    }
    metrics.reset();
    service.reset();  // jobs checkpointed, kernel layer restored
    sd_bus_flush_close_unref(bus);
  }
  sd_event_unref(loop);
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  g_sink = xfer::log::to_journal_or_stderr("xferd");
  CLI::App app{"xferd: the bulk transfer daemon (org.xferd.Xferd1 on D-Bus)"};
  Args a;
  app.add_option("--config", a.config, "main configuration file (absent: built-in defaults)");
  app.add_option("--config-dir", a.config_dir, "drop-in directory, *.conf in name order");
  app.add_option("--state-dir", a.state_dir, "job store directory (overrides [daemon] state_dir)");
  app.add_option("--bus-address", a.bus_address, "connect to this D-Bus address instead of the system bus");
  app.add_option("--log-level", a.log_level, "debug, info, warn, error (overrides [daemon] log_level)")
      ->check(CLI::IsMember({"debug", "info", "warn", "error"}));
  app.add_flag("--check-config", a.check_config, "read the configuration, say what is wrong or OK, and exit");
  CLI11_PARSE(app, argc, argv);
  return run(a);
}
