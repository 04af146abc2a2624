// The transfer history (DESIGN.md "Learning"; cross-layer-hla.txt §III-A
// step 1): what every job measured, one row per control interval per chunk,
// for the offline analysis (xfer-hla analyze) to learn from. xferd and
// xferctl run append to it through a HistoryRecorder (xfer/running_job.h).
//
// Backends behind one interface (open_history):
//   PATH                    SQLite (the default; no set-up)
//   postgresql://...        PostgreSQL for a fleet (libpq). Writers journal
//                           into a local SQLite file and a shipper thread
//                           forwards the rows when the server answers: a
//                           server that is down, restarted or unreachable
//                           loses no row and never blocks a transfer; every
//                           row has a key (node, run, seq, chunk), so a row
//                           sent twice is stored once.
//
// Schema, version 2 (table hla_meta holds schema_version; a version 1
// history is read as it is and gains hla_folded when opened to write);
// both backends:
//
//   hla_runs       one row per run of a job (a daemon job resumed after a
//                  restart is a new run)
//     node TEXT, run TEXT            PRIMARY KEY: the host; "xferd/ID/START_MS"
//                                    or "xferctl/PID/START_MS" (or as migrated)
//     tool TEXT, job_id BIGINT       xferd | xferctl | xfer-hla | migrated; the daemon's id (0)
//     policy, algorithm, label TEXT  the SLA policy, its tuner, the caller's label
//     source_origin TEXT             scheme://host:port of the first origin ("" unknown)
//     dest_host TEXT                 the receiving host (the node's name)
//     link_mbps DOUBLE, link_source  the link rate and where it and the loss came
//                                    from: 'configured' or 'assumed' (old rows), or
//                                    'measured' (the most the interfaces received in
//                                    a quarter second: Machine), then ', loss
//                                    measured' (from the flows) or ', loss configured'
//     handshake_rtt_ms DOUBLE        RTT of the TCP handshakes at discovery (or configured)
//     loss_pct DOUBLE                the path's packet loss: configured, else measured:
//                                    the flows' retransmission signals over the segments
//                                    received (LossCount); NULL: neither
//     files, bytes BIGINT            the dataset: file count and bytes
//     size_mean, size_sd DOUBLE      mean and standard deviation of the file size (bytes)
//     cores_present BIGINT, freq_levels BIGINT   what the kernel layer could set (0: no driver)
//     started_unix, finished_unix DOUBLE
//     outcome TEXT                   running | done | failed | cancelled
//                                    (running at analysis time: the run was cut off)
//
//   hla_intervals  one row per control interval per chunk
//     node, run TEXT, seq, chunk BIGINT    PRIMARY KEY (chunk -1: a whole-job row, migrated)
//     t_unix, t_s, interval_s DOUBLE       end of the interval; since the job began; length
//     settling BIGINT                      1: the interval began with new cc/p/pp (or is the first)
//     chunk_kind TEXT                      small | medium | large (job: migrated whole-job rows)
//     throughput_bps DOUBLE                the chunk's application bytes, bits/s
//     job_throughput_bps DOUBLE            the whole job's
//     bytes_interval BIGINT                the chunk's bytes in the interval
//     joules, dynamic_joules DOUBLE        the chunk's share of the job's share of the
//                                          machine's energy (EnergySplit: by what
//                                          its bytes and connections cost); NULL without a meter
//     job_joules DOUBLE                    the job's share
//     energy_source TEXT                   rapl | model:... | none
//     rtt_ms, delta_rtt_ms, retrans_per_mb DOUBLE, flows BIGINT   the chunk's flows (NULL without a monitor)
//     ext_load DOUBLE                      traffic not any job's, share of the link (0..1)
//     cpu_pct DOUBLE                       the machine's CPU utilisation, percent of online CPUs
//     cores, freq_khz BIGINT               the kernel layer in the interval (NULL: untouched)
//     cc, p, pp BIGINT                     the chunk's params in effect
//     chunk_files, chunk_bytes BIGINT, chunk_size_mean, chunk_size_sd DOUBLE
//     reason TEXT                          why the tuner chose the params
//
//   hla_folded     (version 2) what runs older than the retention taught,
//                  folded by `xfer-hla compact` (compact() below): one row
//                  per path, dataset size class and setting, its figures
//                  summed with weights that halve every half_life_days
//     key TEXT                       PRIMARY KEY: path|size class|knobs|explored
//     path TEXT                      "origin host -> receiving host"
//     size_class, files_class BIGINT round(log2) of the chunks' mean file size and files
//     cc, p, pp, cores, freq_khz BIGINT    the setting
//     explored BIGINT                1: exploration trials
//     seconds, gb DOUBLE             the time the setting was held and what it moved (weighted)
//     mbps_sq DOUBLE                 sum of seconds x (sd^2 + mean^2) of each visit's Mbit/s
//     joules, gb_no_energy DOUBLE    energy where known; what moved without a figure
//     intervals, visits BIGINT       what was folded (unweighted counts)
//     w_link_mbps ... w_ext_load     sums of seconds x the path's and dataset's figures
//     first_unix, last_unix DOUBLE   the oldest and newest interval folded
//     decayed_to DOUBLE              the time the weights were last brought to
//     half_life_days DOUBLE          how fast they fall (what the analysis applies on)
//
// NULL is "no source for this figure", never zero. A SQLite file also
// holds, per row, its revision and the revision shipped (rev, shipped_rev),
// so that any SQLite history can be the journal of a PostgreSQL one (its
// rows then go to the server too).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "xfer/energy.h"
#include "xfer/flow_monitor.h"

namespace xfer {

class Job;
struct IntervalRecord;

namespace hla {

constexpr int kHistorySchemaVersion = 2;

class HistoryError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct RunRow {
  std::string node, run, tool;
  int64_t job_id = 0;
  std::string policy, algorithm, label, source_origin, dest_host;
  double link_mbps = 0;
  std::string link_source = "assumed";
  double handshake_rtt_ms = 0;
  std::optional<double> loss_pct;
  int64_t files = 0, bytes = 0;
  double size_mean = 0, size_sd = 0;
  int64_t cores_present = 0, freq_levels = 0;
  double started_unix = 0, finished_unix = 0;
  std::string outcome = "running";
};

struct IntervalRow {
  std::string node, run;
  int64_t seq = 0, chunk = 0;
  double t_unix = 0, t_s = 0, interval_s = 0;
  bool settling = false;
  std::string chunk_kind;
  double throughput_bps = 0, job_throughput_bps = 0;
  int64_t bytes_interval = 0;
  std::optional<double> joules, dynamic_joules, job_joules;
  std::string energy_source = "none";
  std::optional<double> rtt_ms, delta_rtt_ms, retrans_per_mb;
  std::optional<int64_t> flows;
  std::optional<double> ext_load, cpu_pct;
  std::optional<int64_t> cores, freq_khz;
  int64_t cc = 1, p = 1, pp = 1;
  int64_t chunk_files = 0, chunk_bytes = 0;
  double chunk_size_mean = 0, chunk_size_sd = 0;
  std::string reason;
};

// A row of hla_folded (the schema above).
struct FoldedRow {
  std::string key, path;
  int64_t size_class = 0, files_class = 0;
  int64_t cc = 1, p = 1, pp = 1, cores = 1, freq_khz = 0;
  bool explored = false;
  double seconds = 0, gb = 0, mbps_sq = 0, joules = 0, gb_no_energy = 0;
  int64_t intervals = 0, visits = 0;
  double w_link_mbps = 0, w_rtt_ms = 0, w_loss_pct = 0, w_files = 0, w_bytes = 0, w_size_mean = 0, w_size_sd = 0,
         w_ext_load = 0;
  double first_unix = 0, last_unix = 0, decayed_to = 0, half_life_days = 30;
};

// What a reader gets: the runs and their intervals (intervals[i].run names
// its run; every interval's run is in runs), and what older runs taught,
// folded.
struct HistoryData {
  std::vector<RunRow> runs;
  std::vector<IntervalRow> intervals;
  std::vector<FoldedRow> folded;
  const RunRow* run_of(const IntervalRow& r) const;
};

// A run as the retention sees it: when it ended and how many rows it has.
struct RunAge {
  std::string node, run, outcome;
  double ended_unix = 0;  // finished_unix, else started_unix (a run cut off)
  size_t rows = 0;
};

class History {
 public:
  virtual ~History() = default;
  // Inserts or replaces the run's row (its outcome changes at the end).
  virtual void put_run(const RunRow& r) = 0;
  // Appends; a row whose key is there already is left as it is.
  virtual void append(const std::vector<IntervalRow>& rows) = 0;
  virtual HistoryData read() const = 0;
  // For the retention (compact()): every run's age and rows; one set of
  // runs with their intervals (folded left empty); the folded rows; and in
  // one transaction, folded rows written (each replacing its key's) and
  // the runs given removed with their intervals.
  virtual std::vector<RunAge> run_ages() const = 0;
  virtual HistoryData read_runs(const std::vector<RunAge>& which) const = 0;
  virtual std::vector<FoldedRow> read_folded() const = 0;
  virtual void fold(const std::vector<FoldedRow>& rows, const std::vector<RunAge>& remove) = 0;
  // Where it is, for messages (a URL's password is not shown).
  virtual std::string where() const = 0;
  // The shipper's state, for a journaled history: rows not yet on the
  // server and the last error ("" when it is in step). Others: 0 and "".
  virtual size_t unshipped() const { return 0; }
  virtual std::string ship_error() const { return ""; }
  // Ships what is journaled now, waiting at most timeout_s; true when
  // nothing is left. (A plain history has nothing to ship.)
  virtual bool flush(double timeout_s) {
    (void)timeout_s;
    return true;
  }
};

// How much of the history stays as it was recorded (history.h's tables);
// the rest is folded (hla_folded), so that it stays bounded as the machine
// lives and the analysis reads a bounded amount (issue 55).
struct Retention {
  double keep_days = 7;       // the rows of runs that ended within this stay as they are...
  size_t keep_rows = 200000;  // ...at most this many interval rows (the oldest runs fold first)
  double half_life_days = 30;  // a folded figure's weight halves over this (paths change)
};
struct CompactReport {
  size_t runs_folded = 0, rows_folded = 0;  // runs that ended done, and their interval rows
  size_t runs_dropped = 0, rows_dropped = 0;  // runs that did not end done (the analysis never reads them)
  size_t folded_before = 0, folded_after = 0;  // hla_folded's rows
  size_t runs_left = 0, rows_left = 0;         // as recorded, after
};
// Folds what the retention no longer keeps: the runs that ended before
// now - keep_days, and the oldest others while more than keep_rows interval
// rows are left. Their rows go through the analysis's preprocessing (the
// same rules and the same samples as analyze) and are added to the folded
// rows of their path, size class and setting, whose weights are first
// brought to now. Runs still running are never folded.
CompactReport compact(History& h, const Retention& r, double now_unix);
// A folded row's figures as of `at` (its weights fallen since decayed_to).
FoldedRow decayed(const FoldedRow& f, double at_unix);

struct HistoryOptions {
  // For postgresql:// URLs: the local journal (SQLite) the rows go to
  // first. Required for a writer; a reader (analyze) reads the server.
  std::string journal;
  bool read_only = false;
  // For postgresql:// URLs: the server itself, writable, no journal (xfer-hla
  // compact on a fleet's history).
  bool direct = false;
  double ship_every_s = 1;      // the shipper's period
  double connect_timeout_s = 3;  // per attempt; the shipper retries every period
};

// A path (SQLite) or a postgresql:// / postgres:// URL. Throws HistoryError
// with the reason: a file that is not a history of a version this program
// knows, a directory, an unreadable file; for read_only, an empty or
// missing history; a PostgreSQL server that cannot be reached (read_only;
// a writer journals and ships later instead).
std::unique_ptr<History> open_history(const std::string& where, const HistoryOptions& o = {});
bool is_postgres_url(const std::string& s);
// The URL without its password, for messages.
std::string redact_url(const std::string& url);
// This host's name in the history.
std::string node_name();

// Rows of a legacy xferd store's `intervals` table (schema v2), whole-job
// rows (chunk -1), with one run per job; the store migrates them into the
// history (history.cpp documents the mapping).
struct LegacyInterval {
  int64_t job_id = 0, seq = 0;
  std::string algorithm, policy, state, params_json, energy_source;
  double t_s = 0, throughput_bps = 0, submitted_at = 0;
  int64_t bytes_done = 0, cc = 1, p = 1, pp = 1, files_total = 0, bytes_total = 0;
  std::optional<int64_t> cores, freq_khz;
  std::optional<double> joules, rtt_ms, retrans_per_mb, ext_load, cpu_pct;
};
void migrate_legacy(History& h, const std::vector<LegacyInterval>& rows);

// Writes one run's rows as its ControlLoop closes intervals. The caller
// fills what only it knows (tool, policy, label, loss) in `run`; the rest
// comes from the job when the transfer begins. A history that fails is
// logged once per error and the transfer goes on.
class HistoryRecorder {
 public:
  // job: what the run row describes (its info, origins and chunks), read
  // at the first interval or at the end; it outlives the recorder.
  HistoryRecorder(History& h, RunRow run, const Job& job);
  // Every closed interval (ControlLoop::on_interval).
  void interval(const IntervalRecord& r);
  // The run's end: done | failed | cancelled | interrupted.
  void finish(const std::string& outcome);
  const RunRow& run() const { return run_; }
  size_t rows() const { return rows_; }

 private:
  void begin();
  void put_run();
  History& h_;
  const Job& job_;
  RunRow run_;
  bool begun_ = false;
  int64_t seq_ = 0;
  size_t rows_ = 0;
  std::string last_error_;
  // The path as measured over the run: the link rate seen, and the flows'
  // loss signals and segments.
  std::string link_given_;  // the front end's link_source
  bool loss_given_ = false;
  double link_seen_bps_ = 0;
  LossCount loss_;
  void measured_path();
  EnergySplit split_;  // the job's energy among its chunks
};

// A run key: "TOOL/ID/START_MS" (ID: the daemon's job id, or the pid).
std::string run_key(const std::string& tool, int64_t id, double started_unix);

}  // namespace hla
}  // namespace xfer
