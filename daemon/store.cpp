#include "store.h"

#include <sqlite3.h>

#include <nlohmann/json.hpp>
#include <optional>

#include "xfer/history.h"
#include "xfer/log.h"
#include "xfer/safe_open.h"
#include "xfer/sqlite_stmt.h"

namespace xferd {

namespace {

constexpr int kSchemaVersion = 3;

// intervals (versions 1 and 2; version 3 moved them to the transfer
// history, xfer/history.h): one row per control interval of a job.
#define XFERD_INTERVALS_COLUMNS                                                                            \
  "job_id INTEGER NOT NULL, seq INTEGER NOT NULL, algorithm TEXT NOT NULL,"                                \
  "t_s REAL NOT NULL, throughput_bps REAL NOT NULL, bytes_done INTEGER NOT NULL,"                          \
  "cc INTEGER NOT NULL, p INTEGER NOT NULL, pp INTEGER NOT NULL, params TEXT NOT NULL,"                     \
  "cores INTEGER, freq_khz INTEGER, joules REAL, energy_source TEXT NOT NULL,"                             \
  "rtt_ms REAL, retrans_per_mb REAL, files_total INTEGER NOT NULL, bytes_total INTEGER NOT NULL,"          \
  "ext_load REAL, cpu_pct REAL,"                                                                           \
  "PRIMARY KEY(job_id, seq)"

const char* kSchema =
    "CREATE TABLE IF NOT EXISTS jobs("
    "  id INTEGER PRIMARY KEY, uid INTEGER NOT NULL, gid INTEGER NOT NULL,"
    "  dest TEXT NOT NULL, manifest TEXT NOT NULL, policy TEXT NOT NULL, options TEXT NOT NULL,"
    "  state TEXT NOT NULL, submitted_at REAL NOT NULL, finished_at REAL,"
    "  error TEXT NOT NULL DEFAULT '', summary TEXT NOT NULL DEFAULT '');";

// Version 1 -> 2: intervals gain ext_load and cpu_pct, and cores, freq_khz
// and joules may be missing (NULL). SQLite changes constraints only by
// copying the table; the rows keep their values.
const char* kFromV1 =
    "BEGIN;"
    "ALTER TABLE intervals RENAME TO intervals_v1;"
    "CREATE TABLE intervals(" XFERD_INTERVALS_COLUMNS ");"
    "INSERT INTO intervals(job_id,seq,algorithm,t_s,throughput_bps,bytes_done,cc,p,pp,params,cores,freq_khz,joules,"
    "  energy_source,rtt_ms,retrans_per_mb,files_total,bytes_total)"
    "  SELECT job_id,seq,algorithm,t_s,throughput_bps,bytes_done,cc,p,pp,params,cores,NULLIF(freq_khz,0),joules,"
    "  energy_source,rtt_ms,retrans_per_mb,files_total,bytes_total FROM intervals_v1;"
    "DROP TABLE intervals_v1;"
    "COMMIT;";

// One prepared statement, finalized on every path.
class Stmt : public xfer::SqliteStmt<StoreError> {
 public:
  Stmt(sqlite3* db, const char* sql) : SqliteStmt(db, sql, "job store: ") {}
};

}  // namespace

Store::Store(const std::string& path) : path_(path) {
  // Manifests hold URLs with their query tokens: the store is root's alone.
  try {
    if (int n = xfer::make_private_file(path, "job store"))
      xfer::log::warn("job store {}: {} file(s) were readable by other users; now owner only", path, n);
  } catch (const std::runtime_error& e) {
    throw StoreError(e.what());
  }
  if (sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, nullptr) !=
      SQLITE_OK) {
    std::string why = db_ ? sqlite3_errmsg(db_) : "out of memory";
    sqlite3_close(db_);
    throw StoreError("job store " + path + ": " + why);
  }
  sqlite3_busy_timeout(db_, 5000);
  try {
    // WAL: a kill -9 loses at most the last transaction, never the file.
    exec("PRAGMA journal_mode=WAL");
    exec("PRAGMA synchronous=NORMAL");
    // A damaged file is reported, never repaired by dropping what it holds.
    Stmt q(db_, "PRAGMA quick_check");
    std::string verdict = q.step() ? q.str(0) : "no answer";
    if (verdict != "ok") throw StoreError("job store: damaged (" + verdict + ")");
    Stmt v(db_, "PRAGMA user_version");
    v.step();
    int version = int(v.i64(0));
    if (version > kSchemaVersion)
      throw StoreError("job store " + path + " has schema version " + std::to_string(version) +
                       ", newer than this xferd's " + std::to_string(kSchemaVersion));
    if (version == 1) exec(kFromV1);
    exec(kSchema);
    exec(("PRAGMA user_version=" + std::to_string(kSchemaVersion)).c_str());
  } catch (const StoreError& e) {
    int code = sqlite3_extended_errcode(db_);
    sqlite3_close(db_);
    db_ = nullptr;
    std::string what = e.what();
    if ((code & 0xff) == SQLITE_BUSY || (code & 0xff) == SQLITE_LOCKED)
      throw StoreError(path + ": the job store is locked by another process (is another xferd running on it?); "
                       "not started, nothing changed");
    if ((code & 0xff) == SQLITE_NOTADB || (code & 0xff) == SQLITE_CORRUPT || what.find("damaged") != std::string::npos)
      throw StoreError(path + ": the job store is damaged (" + what + "); xferd left it as it is and did not start. "
                       "Recover its jobs with `sqlite3 " + path + " .recover | sqlite3 " + path + ".recovered` and "
                       "move the recovered file in its place, or move the file aside to start with an empty store");
    throw StoreError(what + " (" + path + ")");
  }
}

Store::~Store() { sqlite3_close(db_); }

void Store::exec(const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    std::string why = err ? err : "unknown error";
    sqlite3_free(err);
    throw StoreError("job store: " + why);
  }
}

uint64_t Store::insert(JobRow& r) {
  Stmt s(db_, "INSERT INTO jobs(uid,gid,dest,manifest,policy,options,state,submitted_at) VALUES(?,?,?,?,?,?,?,?)");
  s.bind(1, int64_t(r.uid)).bind(2, int64_t(r.gid)).bind(3, r.dest).bind(4, r.manifest).bind(5, r.policy);
  s.bind(6, r.options).bind(7, r.state).bind(8, r.submitted_at);
  s.step();
  r.id = uint64_t(sqlite3_last_insert_rowid(db_));
  return r.id;
}

void Store::set_state(uint64_t id, const std::string& state) {
  Stmt s(db_, "UPDATE jobs SET state=? WHERE id=?");
  s.bind(1, state).bind(2, int64_t(id)).step();
}

void Store::finish(uint64_t id, const std::string& state, const std::string& error, const std::string& summary) {
  Stmt s(db_, "UPDATE jobs SET state=?, error=?, summary=?, finished_at=strftime('%s','now') WHERE id=?");
  s.bind(1, state).bind(2, error).bind(3, summary).bind(4, int64_t(id)).step();
}

std::vector<xfer::hla::LegacyInterval> Store::legacy_intervals() const {
  std::vector<xfer::hla::LegacyInterval> out;
  Stmt t(db_, "SELECT COUNT(*) FROM sqlite_master WHERE type='table' AND name='intervals'");
  t.step();
  if (t.i64(0) == 0) return out;
  Stmt s(db_,
         "SELECT i.job_id,i.seq,i.algorithm,COALESCE(j.policy,''),COALESCE(j.state,''),i.params,i.energy_source,"
         "i.t_s,i.throughput_bps,COALESCE(j.submitted_at,0),i.bytes_done,i.cc,i.p,i.pp,i.files_total,i.bytes_total,"
         "i.cores,i.freq_khz,i.joules,i.rtt_ms,i.retrans_per_mb,i.ext_load,i.cpu_pct "
         "FROM intervals i LEFT JOIN jobs j ON j.id=i.job_id ORDER BY i.job_id,i.seq");
  auto opt_i = [&](int c) { return s.is_null(c) ? std::nullopt : std::optional<int64_t>(s.i64(c)); };
  auto opt_d = [&](int c) { return s.is_null(c) ? std::nullopt : std::optional<double>(s.dbl(c)); };
  while (s.step()) {
    xfer::hla::LegacyInterval l;
    l.job_id = s.i64(0), l.seq = s.i64(1), l.algorithm = s.str(2), l.policy = s.str(3), l.state = s.str(4);
    l.params_json = s.str(5), l.energy_source = s.str(6), l.t_s = s.dbl(7), l.throughput_bps = s.dbl(8);
    l.submitted_at = s.dbl(9), l.bytes_done = s.i64(10), l.cc = s.i64(11), l.p = s.i64(12), l.pp = s.i64(13);
    l.files_total = s.i64(14), l.bytes_total = s.i64(15), l.cores = opt_i(16), l.freq_khz = opt_i(17);
    l.joules = opt_d(18), l.rtt_ms = opt_d(19), l.retrans_per_mb = opt_d(20), l.ext_load = opt_d(21);
    l.cpu_pct = opt_d(22);
    // A job still unfinished in the store is "running" in its legacy run.
    if (l.state == "queued" || l.state == "paused" || l.state == "discovering") l.state = "running";
    out.push_back(std::move(l));
  }
  return out;
}

void Store::drop_legacy_intervals() { exec("DROP TABLE IF EXISTS intervals"); }

std::string Store::text_of(uint64_t id, const char* column) const {
  Stmt s(db_, (std::string("SELECT ") + column + " FROM jobs WHERE id=?").c_str());
  s.bind(1, int64_t(id));
  if (!s.step()) throw StoreError("job store " + path_ + ": no job " + std::to_string(id));
  return s.str(0);
}

std::string Store::manifest(uint64_t id) const { return text_of(id, "manifest"); }
std::string Store::summary(uint64_t id) const { return text_of(id, "summary"); }

void Store::forget(uint64_t id) {
  Stmt s(db_, "DELETE FROM jobs WHERE id=? AND finished_at IS NOT NULL");
  s.bind(1, int64_t(id)).step();
}

std::vector<JobRow> Store::jobs() const {
  Stmt s(db_,
         "SELECT id,uid,gid,dest,'',policy,options,state,submitted_at,COALESCE(finished_at,0),error,'' "
         "FROM jobs ORDER BY id");
  std::vector<JobRow> out;
  while (s.step()) {
    JobRow r;
    r.id = uint64_t(s.i64(0));
    r.uid = uid_t(s.i64(1));
    r.gid = gid_t(s.i64(2));
    r.dest = s.str(3);
    r.manifest = s.str(4);
    r.policy = s.str(5);
    r.options = s.str(6);
    r.state = s.str(7);
    r.submitted_at = s.dbl(8);
    r.finished_at = s.dbl(9);
    r.error = s.str(10);
    r.summary = s.str(11);
    out.push_back(std::move(r));
  }
  return out;
}

int Store::purge_finished_before(double unix_time) {
  Stmt s(db_, "DELETE FROM jobs WHERE finished_at IS NOT NULL AND finished_at < ?");
  s.bind(1, unix_time).step();
  return sqlite3_changes(db_);
}

}  // namespace xferd
