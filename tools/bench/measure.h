// Running one client once and measuring it: wall time, CPU of its process
// tree and of the server, bytes verified by sha256, modelled energy.
#pragma once

#include <sys/types.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace bench {

// One control interval of an xferctl run (its --json timeline).
struct IntervalPoint {
  double t_s = 0;            // end of the interval, on the job's clock
  double mbps = 0;
  double j_per_gb = NAN;     // the interval's energy over its bytes (NaN: none)
  double dynamic_j_per_gb = NAN;  // the same of its dynamic energy (what hla-energy's ceiling bounds)
  double ext_load = NAN;
};

struct RunRow {
  std::string scenario, dataset, client, kind;
  int repeat = 0;
  int round = 0;  // a learning scenario's round (1..); 0: none
  int exit_code = 0;
  double wall_s = 0;
  uint64_t bytes = 0;           // bytes of files that verified
  size_t files = 0, files_ok = 0;
  bool verified = false;        // every file present and its sha256 right
  double throughput_mbps = 0;   // verified bytes over wall time
  double client_cpu_s = 0, server_cpu_s = 0;
  double client_j = 0, server_j = 0, j_per_gb = 0;  // dynamic: the model on the client's CPU time
  // End-system: the idle draw of the online cores over the run (core_s
  // core-seconds) plus the dynamic part. NaN in results from before it was kept.
  double core_s = NAN, end_j = NAN, end_j_per_gb = NAN;
  // The wall time until the files were on disk: the run's, plus a sync(2)
  // the bench makes as soon as the client exits (xferctl syncs each file
  // before it names it; curl, wget and aria2c leave theirs in the page
  // cache). NaN in results from before it was kept.
  double disk_s = NAN;
  // The machine's CPU time (every core, user + system + interrupts, from
  // /proc/stat's 10-ms ticks) over that sync: the writeback the client left
  // to the kernel, which its own CPU time does not hold. NaN: not kept.
  double writeback_cpu_s = NAN;
  // Kernel threads' CPU time from the client's start to the end of that sync:
  // above all the writeback of what a client leaves dirty, which the kernel's
  // flusher does while the client runs (xferctl starts its own writeback,
  // in its own CPU time, to keep its periodic fdatasync short). NaN: not kept.
  double kthread_cpu_s = NAN;
  std::string energy_source;
  std::string goal;   // from the scenario (SLA report)
  // What xferctl's --json said of its tuning: chosen level (energy-efficient),
  // target / controlled mean / deviation (throughput-target); NaN: not given.
  double chosen = NAN, target_mbps = NAN, controlled_mbps = NAN;
  // Median of xferctl's interval throughputs without the first and the last
  // (set-up and tail): the rate it sustains. NaN for other clients.
  double steady_mbps = NAN;
  // In memory only (timelines.csv keeps them): the hla tuners' SLA, the
  // intervals, and how long the run went before the job's clock started
  // (its wall time less the job's seconds), to place the cross traffic's
  // switches on the job's clock.
  double floor_mbps = NAN, budget_j_per_gb = NAN, clock_offset_s = 0;
  std::vector<IntervalPoint> timeline;
};

// In a forked child: runs argv (looked up in PATH unless it names a path);
// exits 127 when it cannot.
[[noreturn]] void exec_argv(const std::vector<std::string>& argv);

// Starts argv (stdin /dev/null, stdout and stderr to LOG_PREFIX.out / .err,
// every signal unblocked); returns its pid.
pid_t spawn_logged(const std::vector<std::string>& argv, const std::string& log_prefix);

// Runs argv to completion (stdout, stderr to log files); wall time and the
// user+sys CPU seconds of the process and every descendant it waited for.
struct Exec {
  int exit_code = 0;
  double wall_s = 0, cpu_s = 0;
  double core_s = 0;  // online cores integrated over the run (sampled every 50 ms): what idles
  // CPUs online when the run began and offline when it ended, brought back
  // online by run_measured: a client killed at the timeout (or one that
  // failed to restore them) must not leave the next client fewer cores.
  std::vector<int> cores_restored;
};
// tick, when given, is called every few milliseconds while it runs (the
// cross traffic's schedule). The CPU is that of this child alone (wait4), so
// other children reaped meanwhile (iperf3) are not charged to it.
Exec run_measured(const std::vector<std::string>& argv, const std::string& log_prefix, double timeout_s,
                  const std::function<void()>& tick = {});

// user+sys CPU seconds of a process and its children (/proc/PID/stat): nginx
// master and workers.
double process_tree_cpu_s(pid_t root);
// CPU seconds of each kernel thread (kworkers: the page cache's writeback,
// the loop device's I/O; ksoftirqd), and what they spent since such a
// reading. A thread that exits in between takes its time with it (a run of
// seconds rarely sees one), so the figure is never above the truth.
std::map<pid_t, double> kernel_threads_cpu();
double kernel_threads_cpu_since(const std::map<pid_t, double>& before);

struct ExpectedFile {
  std::string name, sha256;
  uint64_t size = 0;
};
// Files of `want` in dir whose sha256 is right; their bytes.
size_t verify_files(const std::string& dir, const std::vector<ExpectedFile>& want, uint64_t* bytes);

}  // namespace bench
