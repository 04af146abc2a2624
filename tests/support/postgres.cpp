#include "postgres.h"

#include <unistd.h>

#include <filesystem>
#include <stdexcept>

#include "fixture.h"

namespace fs = std::filesystem;

namespace xtest {

namespace {

// The newest PostgreSQL the package installed (/usr/lib/postgresql/N/bin).
std::string pg_bindir() {
  std::string best;
  int best_v = 0;
  if (fs::exists("/usr/lib/postgresql"))
    for (const auto& e : fs::directory_iterator("/usr/lib/postgresql")) {
      int v = std::atoi(e.path().filename().c_str());
      if (v > best_v && fs::exists(e.path() / "bin" / "initdb")) best_v = v, best = (e.path() / "bin").string();
    }
  if (best.empty()) throw std::runtime_error("no PostgreSQL server here (/usr/lib/postgresql/*/bin/initdb): install the postgresql package (scripts/setup.sh)");
  return best;
}

std::string as_postgres(const std::string& cmd) {
  std::string quoted;
  for (char c : cmd) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return "setpriv --reuid=postgres --regid=postgres --init-groups sh -c '" + quoted + "'";
}

}  // namespace

std::string PgServer::bin(const char* tool) const { return pg_bindir() + "/" + tool; }

PgServer::PgServer() {
  dir = make_temp_dir("pg");
  if (sh("chown postgres:postgres " + dir) != 0) throw std::runtime_error("cannot give " + dir + " to the postgres user");
  port = free_port();
  std::string out = capture(as_postgres(bin("initdb") + " -D " + dir + "/data -A trust -U postgres --no-sync -E UTF8 2>&1"));
  if (!fs::exists(dir + "/data/PG_VERSION")) throw std::runtime_error("initdb failed:\n" + out);
  start();
}

PgServer::~PgServer() {
  stop();
  fs::remove_all(dir);
}

void PgServer::start() {
  if (running_) return;
  // Only a Unix socket in the test's own directory: nothing listens on TCP.
  std::string opts = "-c listen_addresses= -c unix_socket_directories=" + dir + " -p " + std::to_string(port) +
                     " -c fsync=off";
  int rc = sh(as_postgres(bin("pg_ctl") + " -D " + dir + "/data -l " + dir + "/log -w -t 30 -o \"" + opts +
                          "\" start > /dev/null"));
  if (rc != 0) throw std::runtime_error("pg_ctl start failed:\n" + capture("cat " + dir + "/log"));
  running_ = true;
}

void PgServer::stop() {
  if (!running_) return;
  sh(as_postgres(bin("pg_ctl") + " -D " + dir + "/data -m fast -w -t 30 stop > /dev/null"));
  running_ = false;
}

std::string PgServer::conninfo() const {
  return "host=" + dir + " port=" + std::to_string(port) + " dbname=postgres user=postgres";
}

std::string PgServer::url() const {
  return "postgresql://postgres@/postgres?host=" + dir + "&port=" + std::to_string(port);
}

std::string PgServer::query(const std::string& sql) const {
  return capture(as_postgres(bin("psql") + " -X -A -t -h " + dir + " -p " + std::to_string(port) +
                             " -U postgres -d postgres -c \"" + sql + "\" 2>&1"));
}

}  // namespace xtest
