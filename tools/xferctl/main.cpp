// xferctl: the command line of xferd. `run` carries out a job in-process,
// without the daemon (scripts, benchmarks, and the README's main job).
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <fmt/format.h>
#include <iostream>

#include "progress.h"
#include "xfer/engine.h"
#include "xfer/log.h"
#include "xfer/manifest.h"
#include "xfer/tuner.h"

namespace {

enum Exit { kOk = 0, kSomeFailed = 1, kUsage = 2, kFatal = 3, kInterrupted = 130 };

struct RunArgs {
  std::string manifest, dest, sla, http = "auto", log_level = "warn";
  int cc = 0, p = 0, pp = 0;
  long interval_ms = 5000;
  double bandwidth_mbps = 1000, rtt_ms = 0;
  int max_channels = 32;
  bool json = false, no_progress = false;
};

void raise_fd_limit() {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
}

int run(const RunArgs& a) {
  xfer::log::set_level(a.log_level);
  raise_fd_limit();
  xfer::Manifest manifest;
  try {
    manifest = xfer::load_manifest(a.manifest);
  } catch (const xfer::ManifestError& e) {
    fmt::print(stderr, "xferctl: manifest rejected, nothing fetched:\n{}\n", e.what());
    return kUsage;
  }

  bool fixed = a.cc > 0 || a.p > 0 || a.pp > 0;
  std::string policy = a.sla.empty() ? (fixed ? "static" : "min-energy") : a.sla;
  if (fixed && policy != "static") {
    fmt::print(stderr, "xferctl: --cc/--p/--pp fix the params; they go with --sla static, not --sla {}\n", policy);
    return kUsage;
  }
  xfer::TunerOptions topts;
  topts.fixed = xfer::ChunkParams{std::max(1, a.cc), std::max(1, a.p), std::max(1, a.pp)};
  std::unique_ptr<xfer::Tuner> tuner;
  try {
    tuner = xfer::make_tuner(policy, topts);
  } catch (const std::invalid_argument& e) {
    fmt::print(stderr, "xferctl: {}\n", e.what());
    return kUsage;
  }

  sd_event* loop = nullptr;
  sd_event_new(&loop);
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGINT);
  sigaddset(&mask, SIGTERM);
  sigprocmask(SIG_BLOCK, &mask, nullptr);

  xfer::EngineOptions opts;
  opts.http = a.http;
  opts.interval_ms = a.interval_ms;
  opts.bandwidth_mbps = a.bandwidth_mbps;
  opts.rtt_ms = a.rtt_ms;
  opts.max_channels = a.max_channels;

  int rc = kOk;
  {
    xfer::Engine engine(loop);
    std::unique_ptr<xfer::Job> job;
    try {
      job = std::make_unique<xfer::Job>(engine, xfer::Job::Spec{std::move(manifest), a.dest, opts}, std::move(tuner));
    } catch (const std::exception& e) {
      fmt::print(stderr, "xferctl: {}; nothing fetched\n", e.what());
      sd_event_unref(loop);
      return kFatal;
    }
    bool interrupted = false;
    job->on_finished = [&] { sd_event_exit(loop, 0); };
    auto on_signal = [](sd_event_source*, const signalfd_siginfo*, void* ud) {
      auto* st = static_cast<std::pair<xfer::Job*, bool*>*>(ud);
      *st->second = true;
      st->first->cancel();  // progress records are written; run again to resume
      return 0;
    };
    std::pair<xfer::Job*, bool*> sigstate{job.get(), &interrupted};
    sd_event_add_signal(loop, nullptr, SIGINT, on_signal, &sigstate);
    sd_event_add_signal(loop, nullptr, SIGTERM, on_signal, &sigstate);

    bool show_bar = !a.no_progress && isatty(STDERR_FILENO);
    struct BarState {
      xfer::Job* job;
    } bar{job.get()};
    if (show_bar) {
      sd_event_add_time_relative(
          loop, nullptr, CLOCK_MONOTONIC, 0, 50000,
          [](sd_event_source* s, uint64_t, void* ud) {
            auto* b = static_cast<BarState*>(ud);
            xfer::JobProgress p = b->job->progress();
            std::string params;
            nlohmann::json sm = b->job->summary();
            for (const auto& c : sm["chunks"])
              params += fmt::format("{}:{}/{}/{} ", c["kind"].get<std::string>().substr(0, 1), c["cc"].get<int>(),
                                    c["p"].get<int>(), c["pp"].get<int>());
            xferctl::draw_bar(p, params);
            sd_event_source_set_time_relative(s, 250000);
            sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
            return 0;
          },
          &bar);
    }

    job->start();
    if (job->state() == xfer::JobState::Discovering || job->state() == xfer::JobState::Running) sd_event_loop(loop);
    if (show_bar) xferctl::finish_bar();

    nlohmann::json s = job->summary();
    if (a.json) std::cout << s.dump(2) << std::endl;
    else xferctl::print_result(s);
    if (interrupted) {
      fmt::print(stderr, "xferctl: interrupted; progress saved, run the same command again to resume\n");
      rc = kInterrupted;
    } else if (job->state() == xfer::JobState::Failed) {
      rc = kFatal;
    } else if (!job->failed().empty()) {
      rc = kSomeFailed;
    }
    job.reset();
  }
  sd_event_unref(loop);
  return rc;
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
  run_cmd->add_option("--sla", ra.sla, "SLA policy (static, min-energy); default min-energy, or static with --cc/--p/--pp");
  run_cmd->add_option("--cc", ra.cc, "concurrency: files in flight per chunk")->check(CLI::Range(1, 1024));
  run_cmd->add_option("--p", ra.p, "parallelism: range streams (TCP connections) per file")->check(CLI::Range(1, 64));
  run_cmd->add_option("--pp", ra.pp, "pipelining: requests outstanding per connection")->check(CLI::Range(1, 128));
  run_cmd->add_option("--interval-ms", ra.interval_ms, "control interval")->check(CLI::Range(100, 600000));
  run_cmd->add_option("--http", ra.http, "http:// origins: auto (try h2c), 1.1, h2c")->check(CLI::IsMember({"auto", "1.1", "h2c"}));
  run_cmd->add_option("--bandwidth-mbps", ra.bandwidth_mbps, "link rate used for the BDP")->check(CLI::PositiveNumber);
  run_cmd->add_option("--rtt-ms", ra.rtt_ms, "RTT used for the BDP (default: measured)")->check(CLI::NonNegativeNumber);
  run_cmd->add_option("--max-channels", ra.max_channels, "cap on connections over all chunks")->check(CLI::Range(1, 4096));
  run_cmd->add_flag("--json", ra.json, "print one JSON object with the result");
  run_cmd->add_flag("--no-progress", ra.no_progress, "no progress bar");
  run_cmd->add_option("--log-level", ra.log_level, "debug, info, warn, error")->check(CLI::IsMember({"debug", "info", "warn", "error", "off"}));

  CLI11_PARSE(app, argc, argv);
  if (*run_cmd) return run(ra);
  return kUsage;
}
