// A real PostgreSQL server for tests (Debian's `postgresql` package): a
// cluster made by initdb in a temp dir, run as the `postgres` user
// (PostgreSQL refuses root), listening only on a Unix socket in that dir.
// stop() and start() again keep the cluster: what a test needs to show that
// a server going away mid-job loses nothing.
#pragma once

#include <string>

namespace xtest {

class PgServer {
 public:
  PgServer();   // initdb + start; throws std::runtime_error with the tools' output
  ~PgServer();  // stops it, removes the cluster
  PgServer(const PgServer&) = delete;
  PgServer& operator=(const PgServer&) = delete;

  void start();
  void stop();  // fast shutdown: connections are cut, as a server going away would
  bool running() const { return running_; }
  // A libpq connection string / URL for the `postgres` database.
  std::string conninfo() const;
  std::string url() const;
  // psql's output for one statement (as the postgres user), for checks.
  std::string query(const std::string& sql) const;

  std::string dir;  // the cluster (data/), its socket and its log
  int port = 0;

 private:
  std::string bin(const char* tool) const;
  bool running_ = false;
};

}  // namespace xtest
