// The job store: one SQLite database, STATE_DIR/xferd.db. It holds what a
// restart needs to carry every unfinished job on (kill -9 included; the bytes
// themselves are in the destination's .part files and their records), the
// summaries of finished jobs, and one row per control interval: the history
// the learning tuner (Cross-LayerHLA) fits its surfaces to.
//
// Schema (version 1; `PRAGMA user_version`):
//
//   jobs       one row per job
//     id            INTEGER PRIMARY KEY  N of /org/xferd/Xferd1/job/N
//     uid, gid      INTEGER              the caller; owns every file the job writes
//     dest          TEXT                 destination directory (absolute)
//     manifest      TEXT                 the manifest, one 'URL [SIZE] [sha256:HEX]' a line
//     policy        TEXT                 SLA policy name (as configured when submitted)
//     options       TEXT                 JSON: the caller's options (label, target_mbps, ...)
//     state         TEXT                 queued | running | paused | done | failed | cancelled
//     submitted_at  REAL                 Unix time
//     finished_at   REAL                 Unix time, NULL until finished
//     error         TEXT                 why it failed, '' otherwise
//     summary       TEXT                 JSON, the job's result (as `xferctl run --json`)
//
//   intervals  one row per control interval of every job; kept when the job's
//              row is purged (it is the learning history)
//     job_id, seq   INTEGER              PRIMARY KEY (job_id, seq)
//     algorithm     TEXT                 the tuner in charge
//     t_s           REAL                 seconds since the job started
//     throughput_bps REAL, bytes_done INTEGER
//     cc, p, pp     INTEGER              totals over chunks: channels, streams, max pp
//     params        TEXT                 JSON: per chunk {kind, cc, p, pp}, the tuner's reason
//     cores         INTEGER, freq_khz INTEGER   the kernel layer during the interval (0: untouched)
//     joules        REAL, energy_source TEXT    rapl:... or model:... (never unlabelled)
//     rtt_ms        REAL, retrans_per_mb REAL   from the flow monitor (NULL without one)
//     files_total   INTEGER, bytes_total INTEGER  the dataset's shape
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "xfer/engine.h"

struct sqlite3;

namespace xferd {

struct JobRow {
  uint64_t id = 0;
  uid_t uid = 0;
  gid_t gid = 0;
  std::string dest, manifest, policy, options = "{}", state = "queued";
  double submitted_at = 0, finished_at = 0;
  std::string error, summary;
};

class StoreError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Store {
 public:
  // Opens (creating) path; throws StoreError with the path and SQLite's reason.
  explicit Store(const std::string& path);
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  uint64_t insert(JobRow& row);  // sets row.id
  void set_state(uint64_t id, const std::string& state);
  void finish(uint64_t id, const std::string& state, const std::string& error, const std::string& summary);
  // kinds: the chunks' names (small, medium, large) in Params order.
  void add_interval(uint64_t job_id, int seq, const std::string& algorithm, const xfer::Observation& o,
                    const std::vector<std::string>& kinds, size_t files_total, uint64_t bytes_total);
  // Every kept job, oldest first, without its manifest and summary (which can
  // be large: read them one job at a time).
  std::vector<JobRow> jobs() const;
  std::string manifest(uint64_t id) const;
  std::string summary(uint64_t id) const;
  // Drops one finished job's row (its interval records stay: they are history).
  void forget(uint64_t id);
  size_t interval_count(uint64_t job_id) const;
  // Drops finished jobs older than the given Unix time; returns how many.
  int purge_finished_before(double unix_time);

 private:
  void exec(const char* sql);
  std::string text_of(uint64_t id, const char* column) const;
  sqlite3* db_ = nullptr;
  std::string path_;
};

}  // namespace xferd
