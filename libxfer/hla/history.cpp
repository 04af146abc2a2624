// The history's backends: SQLite, PostgreSQL, and PostgreSQL behind a local
// SQLite journal with a shipper thread (history.h).
#include "xfer/history.h"
#include "xfer/safe_open.h"

#include <filesystem>
#include <fcntl.h>
#include <libpq-fe.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <fmt/format.h>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "columns.h"
#include "xfer/log.h"
#include "xfer/sqlite_stmt.h"
#include "xfer/text.h"

namespace xfer::hla {

namespace {

using Stmt = SqliteStmt<HistoryError>;

// Every run's key, outcome, end (its start when it has none) and rows.
constexpr const char* kRunAgesSql =
    "SELECT r.node,r.run,r.outcome,CASE WHEN r.finished_unix>0 THEN r.finished_unix ELSE r.started_unix END,"
    "(SELECT COUNT(*) FROM hla_intervals i WHERE i.node=r.node AND i.run=r.run) FROM hla_runs r";
// One run's rows: select_sql's WHERE in each backend's placeholders.
constexpr const char* kOneRunSqlite = "node=?1 AND run=?2";
constexpr const char* kOneRunPg = "node=$1 AND run=$2";

// ---- SQLite -----------------------------------------------------------------

class SqliteHistory : public History {
 public:
  SqliteHistory(const std::string& path, bool read_only) : path_(path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
      throw HistoryError("history " + path + ": not a regular file");
    if (read_only && ::access(path.c_str(), F_OK) != 0)
      throw HistoryError("history " + path + ": no such file (nothing has been recorded there)");
    int flags = (read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE) | SQLITE_OPEN_FULLMUTEX;
    // A history says who fetched what from where, and when: owner only.
    if (!read_only) try {
        if (int n = make_private_file(path, "history"))
          log::warn("history {}: {} file(s) were readable by other users; now owner only", path, n);
      } catch (const std::runtime_error& e) {
        throw HistoryError(e.what());
      }
    if (sqlite3_open_v2(path.c_str(), &db_, flags, nullptr) != SQLITE_OK) {
      std::string why = db_ ? sqlite3_errmsg(db_) : "out of memory";
      sqlite3_close(db_);
      throw HistoryError("history " + path + ": " + why);
    }
    sqlite3_busy_timeout(db_, 5000);
    try {
      if (!read_only) exec("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;");
      bool has_meta = false, has_other = false;
      Stmt t(db_, "SELECT name FROM sqlite_master WHERE type='table'", prefix());
      while (t.step()) {
        std::string n = t.str(0);
        if (n == "hla_meta") has_meta = true;
        else if (n.rfind("hla_", 0) != 0) has_other = true;
      }
      if (!has_meta && (read_only || has_other))
        throw HistoryError("history " + path + ": not a transfer history (it has no hla_meta table)");
      int version = kHistorySchemaVersion;
      if (has_meta) {
        Stmt v(db_, "SELECT value FROM hla_meta WHERE key='schema_version'", prefix());
        version = v.step() ? std::atoi(v.str(0).c_str()) : 0;
        if (version < 1 || version > kHistorySchemaVersion)
          throw HistoryError(fmt::format("history {}: schema version {}, this program reads versions 1 to {}", path,
                                         version, kHistorySchemaVersion));
      }
      if (!read_only) {
        exec(schema_sql(true));  // every SQLite history can serve as a journal
        exec(fmt::format("INSERT OR IGNORE INTO hla_meta VALUES('schema_version','{}')", kHistorySchemaVersion));
        if (version < kHistorySchemaVersion) {  // version 1 gains hla_folded (schema_sql made it)
          exec(fmt::format("UPDATE hla_meta SET value='{}' WHERE key='schema_version'", kHistorySchemaVersion));
          log::info("history {}: schema version {} brought to {} (hla_folded added)", path, version,
                    kHistorySchemaVersion);
        }
        has_folded_ = true;
      } else {
        Stmt f(db_, "SELECT 1 FROM sqlite_master WHERE type='table' AND name='hla_folded'", prefix());
        has_folded_ = f.step();
      }
    } catch (...) {
      sqlite3_close(db_);
      db_ = nullptr;
      throw;
    }
  }
  ~SqliteHistory() override { sqlite3_close(db_); }

  void put_run(const RunRow& r) override {
    Stmt s(db_, insert_runs_sql([](int i) { return "?" + std::to_string(i); }, true), prefix());
    bind_row(s, run_columns(), r);
    s.step();
  }

  void append(const std::vector<IntervalRow>& rows) override {
    if (rows.empty()) return;
    in_transaction("BEGIN", [&] {
      Stmt s(db_, insert_intervals_sql([](int i) { return "?" + std::to_string(i); }), prefix());
      put_rows(s, interval_columns(), rows);
    });
  }

  HistoryData read() const override {
    HistoryData d;
    read_table(select_sql(true), run_columns(), d.runs);
    read_table(select_sql(false), interval_columns(), d.intervals);
    d.folded = read_folded();
    return d;
  }

  std::vector<RunAge> run_ages() const override {
    std::vector<RunAge> out;
    Stmt s(db_, kRunAgesSql, prefix());
    while (s.step()) out.push_back({s.str(0), s.str(1), s.str(2), s.dbl(3), size_t(s.i64(4))});
    return out;
  }

  HistoryData read_runs(const std::vector<RunAge>& which) const override {
    HistoryData d;
    Stmt r(db_, select_sql(true, kOneRunSqlite), prefix()), i(db_, select_sql(false, kOneRunSqlite), prefix());
    for (const RunAge& a : which) {
      r.bind(1, a.node).bind(2, a.run);
      while (r.step()) fill_one(r, run_columns(), d.runs);
      r.reset();
      i.bind(1, a.node).bind(2, a.run);
      while (i.step()) fill_one(i, interval_columns(), d.intervals);
      i.reset();
    }
    return d;
  }

  std::vector<FoldedRow> read_folded() const override {
    std::vector<FoldedRow> out;
    if (has_folded_) read_table(select_folded_sql(), folded_columns(), out);
    return out;
  }

  void fold(const std::vector<FoldedRow>& rows, const std::vector<RunAge>& remove) override {
    {
      Stmt j(db_, "SELECT value FROM hla_meta WHERE key='journal_for'", prefix());
      if (j.step())
        throw HistoryError(prefix() + "this file is the journal of " + j.str(0) +
                           ": compact that history (the shipper prunes what the server has)");
    }
    in_transaction("BEGIN IMMEDIATE", [&] {
      Stmt up(db_, upsert_folded_sql([](int k) { return "?" + std::to_string(k); }), prefix());
      put_rows(up, folded_columns(), rows);
      Stmt di(db_, "DELETE FROM hla_intervals WHERE node=?1 AND run=?2", prefix());
      Stmt dr(db_, "DELETE FROM hla_runs WHERE node=?1 AND run=?2", prefix());
      for (const RunAge& a : remove) {
        di.bind(1, a.node).bind(2, a.run).step();
        di.reset();
        dr.bind(1, a.node).bind(2, a.run).step();
        dr.reset();
      }
    });
  }

  // The journal's side: this file journals for a server (compact() refuses it).
  void mark_journal_for(const std::string& shown_url) {
    Stmt s(db_, "INSERT OR REPLACE INTO hla_meta VALUES('journal_for',?1)", prefix());
    s.bind(1, shown_url).step();
  }
  // Rows the server has, of runs that ended before `before_unix`: the
  // journal keeps only what is still to ship and the last day's.
  size_t prune_shipped(double before_unix) {
    size_t n = 0;
    in_transaction("BEGIN IMMEDIATE", [&] {
      const char* runs = "SELECT node,run FROM hla_runs WHERE shipped_rev>=rev AND outcome!='running' AND "
                         "finished_unix>0 AND finished_unix<?1";
      Stmt di(db_, fmt::format("DELETE FROM hla_intervals WHERE shipped_rev>=rev AND (node,run) IN ({})", runs),
              prefix());
      di.bind(1, before_unix).step();
      n = size_t(sqlite3_changes(db_));
      Stmt dr(db_, fmt::format("DELETE FROM hla_runs WHERE (node,run) IN ({}) AND NOT EXISTS (SELECT 1 FROM "
                               "hla_intervals i WHERE i.node=hla_runs.node AND i.run=hla_runs.run)",
                               runs),
              prefix());
      dr.bind(1, before_unix).step();
    });
    return n;
  }

  std::string where() const override { return path_; }

  // The journal's side (JournaledHistory): rows whose latest revision is
  // not on the server, with the revision read.
  template <class Row>
  void unshipped(const char* table, const std::vector<Column<Row>>& cols, size_t limit,
                 std::vector<std::pair<Row, std::pair<int64_t, int64_t>>>& out) const {
    std::string names;
    for (const auto& c : cols) names += std::string(c.name) + ",";
    Stmt s(db_, fmt::format("SELECT {}rowid,rev FROM {} WHERE shipped_rev<rev ORDER BY rowid LIMIT {}", names, table, limit),
           prefix());
    while (s.step()) {
      Row r;
      fill(s, cols, r);
      out.push_back({std::move(r), {s.i64(int(cols.size())), s.i64(int(cols.size()) + 1)}});
    }
  }
  void mark_shipped(const char* table, const std::vector<std::pair<int64_t, int64_t>>& rowid_rev) {
    in_transaction("BEGIN", [&] {
      Stmt s(db_, fmt::format("UPDATE {} SET shipped_rev=?2 WHERE rowid=?1", table), prefix());
      for (auto [id, rev] : rowid_rev) {
        s.bind(1, id).bind(2, rev).step();
        s.reset();
      }
    });
  }
  size_t count_unshipped() const {
    Stmt s(db_, "SELECT (SELECT COUNT(*) FROM hla_runs WHERE shipped_rev<rev)+"
                "(SELECT COUNT(*) FROM hla_intervals WHERE shipped_rev<rev)", prefix());
    s.step();
    return size_t(s.i64(0));
  }

 private:
  std::string prefix() const { return "history " + path_ + ": "; }
  void exec(const std::string& sql) {
    char* err = nullptr;
    if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
      std::string why = err ? err : "unknown error";
      sqlite3_free(err);
      throw HistoryError(prefix() + why);
    }
  }
  // f() between `begin` and COMMIT: all of it or, if it throws, none.
  template <class F>
  void in_transaction(const char* begin, F&& f) {
    exec(begin);
    try {
      f();
      exec("COMMIT");
    } catch (...) {
      sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
      throw;
    }
  }
  template <class Row>
  static void bind_row(Stmt& s, const std::vector<Column<Row>>& cols, const Row& r) {
    for (size_t i = 0; i < cols.size(); ++i) {
      Value v = cols[i].get(r);
      int k = int(i) + 1;
      if (auto* n = std::get_if<int64_t>(&v)) s.bind(k, *n);
      else if (auto* d = std::get_if<double>(&v)) s.bind(k, *d);
      else if (auto* t = std::get_if<std::string>(&v)) s.bind(k, *t);
      else s.null(k);
    }
  }
  template <class Row>
  static void put_rows(Stmt& s, const std::vector<Column<Row>>& cols, const std::vector<Row>& rows) {
    for (const Row& r : rows) {
      bind_row(s, cols, r);
      s.step();
      s.reset();
    }
  }
  template <class Row>
  static void fill(const Stmt& s, const std::vector<Column<Row>>& cols, Row& r) {
    for (size_t i = 0; i < cols.size(); ++i) {
      int c = int(i);
      Value v;
      switch (s.type(c)) {
        case SQLITE_NULL: break;
        case SQLITE_INTEGER: v = s.i64(c); break;
        case SQLITE_FLOAT: v = s.dbl(c); break;
        default: v = s.str(c);
      }
      cols[i].set(r, v);
    }
  }
  template <class Row>
  static void fill_one(const Stmt& s, const std::vector<Column<Row>>& cols, std::vector<Row>& out) {
    Row r;
    fill(s, cols, r);
    out.push_back(std::move(r));
  }
  template <class Row>
  void read_table(const std::string& sql, const std::vector<Column<Row>>& cols, std::vector<Row>& out) const {
    Stmt s(db_, sql, prefix());
    while (s.step()) fill_one(s, cols, out);
  }

  sqlite3* db_ = nullptr;
  std::string path_;
  bool has_folded_ = false;  // a version 1 history opened to read has none
};

// ---- PostgreSQL -------------------------------------------------------------

class PgHistory : public History {
 public:
  PgHistory(const std::string& url, double connect_timeout_s) : url_(url) {
    std::string timeout = std::to_string(std::max(1, int(connect_timeout_s + 0.5)));
    const char* keys[] = {"dbname", "connect_timeout", "application_name", nullptr};
    const char* vals[] = {url.c_str(), timeout.c_str(), "xferd-history", nullptr};
    conn_ = PQconnectdbParams(keys, vals, 1);
    if (!conn_ || PQstatus(conn_) != CONNECTION_OK) {
      std::string why = conn_ ? one_line(PQerrorMessage(conn_)) : "out of memory";
      PQfinish(conn_);
      conn_ = nullptr;
      throw HistoryError("history " + redact_url(url) + ": cannot connect: " + why);
    }
    exec("SET client_min_messages=warning");
    exec(schema_sql(false));
    exec(fmt::format("INSERT INTO hla_meta VALUES('schema_version','{}') ON CONFLICT DO NOTHING",
                     kHistorySchemaVersion));
    PGresult* r = PQexec(conn_, "SELECT value FROM hla_meta WHERE key='schema_version'");
    int version = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) > 0 ? std::atoi(PQgetvalue(r, 0, 0)) : 0;
    PQclear(r);
    if (version < 1 || version > kHistorySchemaVersion) {
      PQfinish(conn_);
      conn_ = nullptr;
      throw HistoryError(fmt::format("history {}: schema version {}, this program reads versions 1 to {}",
                                     redact_url(url), version, kHistorySchemaVersion));
    }
    if (version < kHistorySchemaVersion) {  // version 1 gained hla_folded above (schema_sql)
      exec(fmt::format("UPDATE hla_meta SET value='{}' WHERE key='schema_version'", kHistorySchemaVersion));
      log::info("history {}: schema version {} brought to {} (hla_folded added)", redact_url(url), version,
                kHistorySchemaVersion);
    }
  }
  ~PgHistory() override { PQfinish(conn_); }

  bool ok() const { return PQstatus(conn_) == CONNECTION_OK; }

  void put_run(const RunRow& r) override { put_runs({r}); }
  void put_runs(const std::vector<RunRow>& rows) {
    send(insert_runs_sql([](int i) { return "$" + std::to_string(i); }, false), run_columns(), rows);
  }
  void append(const std::vector<IntervalRow>& rows) override {
    send(insert_intervals_sql([](int i) { return "$" + std::to_string(i); }), interval_columns(), rows);
  }

  HistoryData read() const override {
    HistoryData d;
    read_table(select_sql(true), run_columns(), d.runs);
    read_table(select_sql(false), interval_columns(), d.intervals);
    d.folded = read_folded();
    return d;
  }
  std::vector<RunAge> run_ages() const override {
    std::vector<RunAge> out;
    PGresult* r = query(kRunAgesSql, {});
    for (int i = 0; i < PQntuples(r); ++i)
      out.push_back({PQgetvalue(r, i, 0), PQgetvalue(r, i, 1), PQgetvalue(r, i, 2), std::strtod(PQgetvalue(r, i, 3), nullptr),
                     size_t(std::strtoull(PQgetvalue(r, i, 4), nullptr, 10))});
    PQclear(r);
    return out;
  }
  HistoryData read_runs(const std::vector<RunAge>& which) const override {
    HistoryData d;
    for (const RunAge& a : which) {
      read_table(select_sql(true, kOneRunPg), run_columns(), d.runs, {a.node, a.run});
      read_table(select_sql(false, kOneRunPg), interval_columns(), d.intervals, {a.node, a.run});
    }
    return d;
  }
  std::vector<FoldedRow> read_folded() const override {
    std::vector<FoldedRow> out;
    read_table(select_folded_sql(), folded_columns(), out);
    return out;
  }
  void fold(const std::vector<FoldedRow>& rows, const std::vector<RunAge>& remove) override {
    in_transaction([&] {
      put_rows(upsert_folded_sql([](int i) { return "$" + std::to_string(i); }), folded_columns(), rows);
      for (const RunAge& a : remove) {
        PQclear(query("DELETE FROM hla_intervals WHERE node=$1 AND run=$2", {a.node, a.run}));
        PQclear(query("DELETE FROM hla_runs WHERE node=$1 AND run=$2", {a.node, a.run}));
      }
    });
  }
  std::string where() const override { return redact_url(url_); }

 private:
  static std::string one_line(const char* msg) {
    std::string s = msg ? msg : "";
    for (char& c : s)
      if (c == '\n') c = ' ';
    while (!s.empty() && s.back() == ' ') s.pop_back();
    return s;
  }
  void exec(const std::string& sql) const {
    PGresult* r = PQexec(conn_, sql.c_str());
    ExecStatusType st = PQresultStatus(r);
    std::string why = one_line(PQresultErrorMessage(r));
    PQclear(r);
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) throw HistoryError("history " + where() + ": " + why);
  }
  // A statement with text parameters; its result (the caller clears it),
  // or HistoryError.
  PGresult* query(const std::string& sql, const std::vector<std::string>& args) const {
    std::vector<const char*> params;
    for (const std::string& a : args) params.push_back(a.c_str());
    PGresult* r = PQexecParams(conn_, sql.c_str(), int(params.size()), nullptr, params.data(), nullptr, nullptr, 0);
    ExecStatusType st = PQresultStatus(r);
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
      std::string why = one_line(PQresultErrorMessage(r));
      PQclear(r);
      throw HistoryError("history " + where() + ": " + why);
    }
    return r;
  }
  // Each row through sql (in the caller's transaction).
  template <class Row>
  void put_rows(const std::string& sql, const std::vector<Column<Row>>& cols, const std::vector<Row>& rows) {
    for (const Row& row : rows) {
      std::vector<std::string> text(cols.size());
      std::vector<const char*> params(cols.size());
      for (size_t i = 0; i < cols.size(); ++i) {
        Value v = cols[i].get(row);
        text[i] = value_text(v);
        params[i] = std::holds_alternative<std::monostate>(v) ? nullptr : text[i].c_str();
      }
      PGresult* r = PQexecParams(conn_, sql.c_str(), int(cols.size()), nullptr, params.data(), nullptr, nullptr, 0);
      bool good = PQresultStatus(r) == PGRES_COMMAND_OK;
      std::string why = one_line(PQresultErrorMessage(r));
      PQclear(r);
      if (!good) throw HistoryError("history " + where() + ": " + why);
    }
  }
  // All rows in one transaction: on the server, all or none.
  template <class Row>
  void send(const std::string& sql, const std::vector<Column<Row>>& cols, const std::vector<Row>& rows) {
    if (rows.empty()) return;
    in_transaction([&] { put_rows(sql, cols, rows); });
  }
  // f() in one server transaction: all of it or, if it throws, none.
  template <class F>
  void in_transaction(F&& f) {
    exec("BEGIN");
    try {
      f();
      exec("COMMIT");
    } catch (...) {
      if (ok()) PQclear(PQexec(conn_, "ROLLBACK"));
      throw;
    }
  }
  template <class Row>
  void read_table(const std::string& sql, const std::vector<Column<Row>>& cols, std::vector<Row>& out,
                  const std::vector<std::string>& args = {}) const {
    PGresult* r = query(sql, args);
    for (int i = 0; i < PQntuples(r); ++i) {
      Row row;
      for (size_t c = 0; c < cols.size(); ++c)
        cols[c].set(row, PQgetisnull(r, i, int(c)) ? Value{} : parse_value(cols[c].type, PQgetvalue(r, i, int(c))));
      out.push_back(std::move(row));
    }
    PQclear(r);
  }

  std::string url_;
  PGconn* conn_ = nullptr;
};

// ---- PostgreSQL behind a journal ---------------------------------------------

// Writes go to the SQLite journal only; a thread ships what the server does
// not have yet, in batches, each batch one server transaction, then marks it
// shipped in the journal. A crash between the two sends the batch again,
// which the server's keys make harmless.
class JournaledHistory : public History {
 public:
  JournaledHistory(const std::string& url, const HistoryOptions& o)
      : url_(url), opts_(o), journal_(o.journal, false), shipper_journal_(o.journal, false) {
    journal_.mark_journal_for(redact_url(url));
    thread_ = std::thread([this] { run(); });
  }
  ~JournaledHistory() override {
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

  void put_run(const RunRow& r) override { journal_.put_run(r); }
  void append(const std::vector<IntervalRow>& rows) override { journal_.append(rows); }
  HistoryData read() const override { return journal_.read(); }
  // The journal's own rows (compact() is the server's: the journal refuses
  // to fold, and the shipper prunes what the server has).
  std::vector<RunAge> run_ages() const override { return journal_.run_ages(); }
  HistoryData read_runs(const std::vector<RunAge>& which) const override { return journal_.read_runs(which); }
  std::vector<FoldedRow> read_folded() const override { return journal_.read_folded(); }
  void fold(const std::vector<FoldedRow>& rows, const std::vector<RunAge>& remove) override {
    journal_.fold(rows, remove);
  }
  std::string where() const override { return redact_url(url_) + " (journal " + opts_.journal + ")"; }
  size_t unshipped() const override { return journal_.count_unshipped(); }
  std::string ship_error() const override {
    std::lock_guard<std::mutex> l(mu_);
    return error_;
  }
  bool flush(double timeout_s) override {
    auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    uint64_t start;
    {
      std::lock_guard<std::mutex> l(mu_);
      start = rounds_;
    }
    while (true) {
      {
        std::lock_guard<std::mutex> l(mu_);
        urgent_ = true;
        // Two rounds that began after this call failed: the server is away.
        if (rounds_ >= start + 2 && !error_.empty()) return false;
      }
      cv_.notify_all();
      if (journal_.count_unshipped() == 0) return true;
      if (std::chrono::steady_clock::now() >= until) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }

 private:
  void run() {
    std::unique_ptr<PgHistory> pg;
    while (true) {
      bool last;
      {
        std::lock_guard<std::mutex> l(mu_);
        last = stop_;
      }
      // The round that sees stop_ comes after the writers' last row: it is
      // the last chance for a short-lived writer's rows to leave with it;
      // what it cannot ship, ships at the next start.
      std::string err;
      try {
        if (pg && !pg->ok()) pg.reset();
        if (!pg) pg = std::make_unique<PgHistory>(url_, last ? std::min(opts_.connect_timeout_s, 2.0) : opts_.connect_timeout_s);
        ship(*pg);
      } catch (const std::exception& e) {
        err = e.what();
        pg.reset();
      }
      std::unique_lock<std::mutex> l(mu_);
      if (err != error_) {
        if (!err.empty())
          log::event(log::msg::kHistoryStalled, spdlog::level::warn,
                     "history: {}; the rows wait in the journal {} and go when it answers", err, opts_.journal);
        else if (!error_.empty())
          log::info("history: {} answers again; the journal is shipping", redact_url(url_));
      }
      error_ = err;
      ++rounds_;
      if (last) {
        if (!err.empty())
          log::warn("history: {} rows stay in the journal {} for the next start",
                    shipper_journal_.count_unshipped(), opts_.journal);
        return;
      }
      cv_.wait_for(l, std::chrono::duration<double>(opts_.ship_every_s), [&] { return stop_ || urgent_; });
      urgent_ = false;
    }
  }
  void ship(PgHistory& pg) {
    constexpr size_t kBatch = 2000;
    bool shipped = false;
    while (true) {
      std::vector<std::pair<RunRow, std::pair<int64_t, int64_t>>> runs;
      std::vector<std::pair<IntervalRow, std::pair<int64_t, int64_t>>> ivs;
      shipper_journal_.unshipped("hla_runs", run_columns(), kBatch, runs);
      shipper_journal_.unshipped("hla_intervals", interval_columns(), kBatch, ivs);
      if (runs.empty() && ivs.empty()) break;
      shipped = true;
      std::vector<RunRow> rr;
      std::vector<std::pair<int64_t, int64_t>> rmark, imark;
      for (auto& [r, m] : runs) rr.push_back(r), rmark.push_back(m);
      std::vector<IntervalRow> ir;
      for (auto& [r, m] : ivs) ir.push_back(r), imark.push_back(m);
      pg.put_runs(rr);
      pg.append(ir);
      shipper_journal_.mark_shipped("hla_runs", rmark);
      shipper_journal_.mark_shipped("hla_intervals", imark);
    }
    // In step with the server: after a round that shipped (and once an hour),
    // the rows it has of runs that ended over a day ago leave the journal,
    // which holds what is still to ship, not the past.
    const auto now = std::chrono::system_clock::now();
    if (shipped || now - last_prune_ >= std::chrono::hours(1)) {
      const double day_ago = std::chrono::duration<double>(now.time_since_epoch()).count() - 86400;
      if (size_t n = shipper_journal_.prune_shipped(day_ago))
        log::info("history: {} rows the server has left the journal {}", n, opts_.journal);
      last_prune_ = now;
    }
  }

  std::string url_;
  HistoryOptions opts_;
  SqliteHistory journal_;          // the writers' connection
  SqliteHistory shipper_journal_;  // the shipper thread's
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false, urgent_ = false;
  uint64_t rounds_ = 0;
  std::string error_;
  std::chrono::system_clock::time_point last_prune_{};  // the shipper's
  std::thread thread_;
};

}  // namespace

const RunRow* HistoryData::run_of(const IntervalRow& r) const {
  for (const RunRow& x : runs)
    if (x.node == r.node && x.run == r.run) return &x;
  return nullptr;
}

bool is_postgres_url(const std::string& s) {
  return s.rfind("postgresql://", 0) == 0 || s.rfind("postgres://", 0) == 0;
}

// The password of a postgresql:// URL hidden wherever libpq takes one: in
// the user information (user:PW@host) and as a query parameter
// (?password=PW, also sslpassword), which libpq reads just the same.
std::string redact_url(const std::string& url) {
  if (!is_postgres_url(url)) return url;
  std::string out = url;
  size_t scheme = out.find("://") + 3;
  size_t end = out.find_first_of("/?#", scheme);
  size_t at = out.rfind('@', end == std::string::npos ? out.size() : end);
  if (at != std::string::npos && at >= scheme) {
    size_t colon = out.find(':', scheme);
    if (colon != std::string::npos && colon < at) out = out.substr(0, colon) + ":***" + out.substr(at);
  }
  size_t q = out.find('?');
  if (q == std::string::npos) return out;
  std::string head = out.substr(0, q + 1), query = out.substr(q + 1), shown;
  for (size_t pos = 0; pos <= query.size();) {
    size_t amp = query.find('&', pos);
    if (amp == std::string::npos) amp = query.size();
    std::string item = query.substr(pos, amp - pos);
    size_t eq = item.find('=');
    std::string name = item.substr(0, eq);
    for (char& c : name) c = char(std::tolower((unsigned char)c));
    if (eq != std::string::npos && name.find("password") != std::string::npos) item = item.substr(0, eq) + "=***";
    shown += (pos ? "&" : "") + item;
    pos = amp + 1;
  }
  return head + shown;
}

std::string node_name() {
  char host[256] = {0};
  if (gethostname(host, sizeof host - 1) != 0 || !host[0]) return "localhost";
  return host;
}

std::string run_key(const std::string& tool, int64_t id, double started_unix) {
  return fmt::format("{}/{}/{}", tool, id, int64_t(started_unix * 1000));
}

// A history file (and its -wal and -shm beside it) steers what the analysis
// learns and where SQLite writes: root uses only one out of other users' reach.
static void trusted_history_file(const std::string& path, const char* noun) {
  try {
    std::string abs = path[0] == '/' ? path : std::filesystem::absolute(path).string();
    require_trusted(abs, Trusted::File, noun);
  } catch (const UntrustedPath& e) {
    throw HistoryError(e.what());
  }
}

std::unique_ptr<History> open_history(const std::string& where, const HistoryOptions& o) {
  if (where.empty()) throw HistoryError("history: no path or URL given");
  if (is_postgres_url(where)) {
    if (o.read_only || o.direct) return std::make_unique<PgHistory>(where, o.connect_timeout_s);
    if (o.journal.empty())
      throw HistoryError("history " + redact_url(where) + ": a PostgreSQL history needs a local journal file");
    trusted_history_file(o.journal, "history journal");
    return std::make_unique<JournaledHistory>(where, o);
  }
  if (where.find("://") != std::string::npos)
    throw HistoryError("history " + where + ": not a file path or a postgresql:// URL");
  trusted_history_file(where, "history");
  return std::make_unique<SqliteHistory>(where, o.read_only);
}

void migrate_legacy(History& h, const std::vector<LegacyInterval>& rows) {
  // One run per job: its key is "xferd/ID/legacy"; its outcome is the job's
  // state when the store still had the job, else "unknown" (the analysis
  // keeps only runs that are done). Each row becomes a whole-job row (chunk
  // -1, kind "job") with the totals the store kept; what the store never
  // had (per-chunk figures, dynamic joules, delta RTT) stays NULL.
  std::string node = node_name();
  std::map<int64_t, RunRow> runs;
  std::vector<IntervalRow> out;
  for (const LegacyInterval& l : rows) {
    RunRow& r = runs[l.job_id];
    if (r.run.empty()) {
      r.node = node, r.run = fmt::format("xferd/{}/legacy", l.job_id), r.tool = "migrated", r.job_id = l.job_id;
      r.policy = l.policy, r.algorithm = l.algorithm, r.dest_host = node;
      r.outcome = l.state.empty() ? "unknown" : l.state;
      r.files = l.files_total, r.bytes = l.bytes_total;
      r.size_mean = l.files_total > 0 ? double(l.bytes_total) / double(l.files_total) : 0;
      r.started_unix = l.submitted_at;
    }
    IntervalRow i;
    i.node = node, i.run = r.run, i.seq = l.seq, i.chunk = -1, i.chunk_kind = "job";
    i.t_s = l.t_s, i.t_unix = l.submitted_at + l.t_s;
    i.throughput_bps = i.job_throughput_bps = l.throughput_bps;
    i.joules = i.job_joules = l.joules;
    i.energy_source = l.energy_source;
    i.rtt_ms = l.rtt_ms, i.retrans_per_mb = l.retrans_per_mb, i.ext_load = l.ext_load, i.cpu_pct = l.cpu_pct;
    i.cores = l.cores, i.freq_khz = l.freq_khz;
    i.cc = l.cc, i.p = l.cc > 0 ? std::max<int64_t>(1, l.p / l.cc) : l.p, i.pp = l.pp;  // the store kept p summed over channels
    i.chunk_files = l.files_total, i.chunk_bytes = l.bytes_total, i.chunk_size_mean = r.size_mean;
    try {
      i.reason = nlohmann::json::parse(l.params_json).value("reason", "");
    } catch (const std::exception&) {
      i.reason = "";
    }
    out.push_back(std::move(i));
  }
  for (auto& [id, r] : runs) h.put_run(r);
  h.append(out);
}

}  // namespace xfer::hla
