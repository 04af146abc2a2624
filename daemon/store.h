// The job store: one SQLite database, STATE_DIR/xferd.db. It holds what a
// restart needs to carry every unfinished job on (kill -9 included; the bytes
// themselves are in the destination's .part files and their records), the
// summaries of finished jobs. (The per-interval history the learning reads
// is the transfer history, STATE_DIR/history.db: xfer/history.h.)
//
// Schema (version 3; `PRAGMA user_version`):
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
//   intervals  (versions 1 and 2 only) one row per control interval; version 3
//              keeps the intervals in the transfer history (xfer/history.h):
//              xferd moves the rows there at its first start on a v2 store
//              (legacy_intervals, then drop_legacy_intervals once the history
//              holds them), so no row is lost.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "xfer/engine.h"
#include "xfer/history.h"

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
  // A store from before version 3: its intervals, for the history. Empty
  // when there are none (or they were moved already).
  std::vector<xfer::hla::LegacyInterval> legacy_intervals() const;
  void drop_legacy_intervals();
  // Every kept job, oldest first, without its manifest and summary (which can
  // be large: read them one job at a time).
  std::vector<JobRow> jobs() const;
  std::string manifest(uint64_t id) const;
  std::string summary(uint64_t id) const;
  // Drops one finished job's row.
  void forget(uint64_t id);
  // Drops finished jobs older than the given Unix time; returns how many.
  int purge_finished_before(double unix_time);

 private:
  void exec(const char* sql);
  std::string text_of(uint64_t id, const char* column) const;
  sqlite3* db_ = nullptr;
  std::string path_;
};

}  // namespace xferd
