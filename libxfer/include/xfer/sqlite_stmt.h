// One prepared SQLite statement, finalized on every path; every failure
// throws Error(prefix + SQLite's message). Used by xferd's job store and by
// the history's SQLite backend.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <string>

namespace xfer {

template <class Error>
class SqliteStmt {
 public:
  SqliteStmt(sqlite3* db, const std::string& sql, std::string prefix) : db_(db), prefix_(std::move(prefix)) {
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &s_, nullptr) != SQLITE_OK) fail();
  }
  ~SqliteStmt() { sqlite3_finalize(s_); }
  SqliteStmt(const SqliteStmt&) = delete;
  SqliteStmt& operator=(const SqliteStmt&) = delete;

  SqliteStmt& bind(int i, int64_t v) { return check(sqlite3_bind_int64(s_, i, v)); }
  SqliteStmt& bind(int i, double v) { return check(sqlite3_bind_double(s_, i, v)); }
  SqliteStmt& bind(int i, const std::string& v) {
    return check(sqlite3_bind_text(s_, i, v.c_str(), int(v.size()), SQLITE_TRANSIENT));
  }
  SqliteStmt& null(int i) { return check(sqlite3_bind_null(s_, i)); }
  // True with a row to read; false when done.
  bool step() {
    int rc = sqlite3_step(s_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    fail();
    return false;
  }
  void reset() {
    sqlite3_reset(s_);
    sqlite3_clear_bindings(s_);
  }
  int columns() const { return sqlite3_column_count(s_); }
  bool is_null(int c) const { return sqlite3_column_type(s_, c) == SQLITE_NULL; }
  int type(int c) const { return sqlite3_column_type(s_, c); }
  int64_t i64(int c) const { return sqlite3_column_int64(s_, c); }
  double dbl(int c) const { return sqlite3_column_double(s_, c); }
  std::string str(int c) const {
    const unsigned char* t = sqlite3_column_text(s_, c);
    return t ? std::string(reinterpret_cast<const char*>(t), size_t(sqlite3_column_bytes(s_, c))) : "";
  }

 private:
  SqliteStmt& check(int rc) {
    if (rc != SQLITE_OK) fail();
    return *this;
  }
  [[noreturn]] void fail() { throw Error(prefix_ + sqlite3_errmsg(db_)); }
  sqlite3* db_;
  std::string prefix_;
  sqlite3_stmt* s_ = nullptr;
};

}  // namespace xfer
