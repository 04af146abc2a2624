// The PostgreSQL fixture the fleet history's tests stand on: a real server
// from Debian's package, as the postgres user, on a Unix socket in a temp dir;
// reachable with libpq; stopped (connections refused) and started again
// with its data.
#include <gtest/gtest.h>
#include <libpq-fe.h>

#include <string>

#include "postgres.h"

using xtest::PgServer;

namespace {

// "" when the statement ran, else libpq's error.
std::string exec(const std::string& conninfo, const std::string& sql) {
  PGconn* c = PQconnectdb(conninfo.c_str());
  std::string why;
  if (PQstatus(c) != CONNECTION_OK) {
    why = PQerrorMessage(c);
  } else {
    PGresult* r = PQexec(c, sql.c_str());
    if (PQresultStatus(r) != PGRES_COMMAND_OK && PQresultStatus(r) != PGRES_TUPLES_OK) why = PQerrorMessage(c);
    PQclear(r);
  }
  PQfinish(c);
  return why.empty() ? "" : why;
}

}  // namespace

TEST(Postgres, AServerStopsAndStartsAgainWithItsData) {
  PgServer pg;
  ASSERT_EQ(exec(pg.conninfo(), "CREATE TABLE t(k INTEGER PRIMARY KEY, v TEXT)"), "");
  ASSERT_EQ(exec(pg.url(), "INSERT INTO t VALUES (1, 'kept')"), "");  // the URL form reaches it too
  EXPECT_EQ(pg.query("SELECT v FROM t WHERE k = 1"), "kept\n");
  pg.stop();
  std::string down = exec(pg.conninfo(), "SELECT 1");
  EXPECT_NE(down, "");  // refused while it is away
  EXPECT_NE(down.find("No such file or directory"), std::string::npos) << down;
  pg.start();
  EXPECT_EQ(exec(pg.conninfo(), "SELECT v FROM t"), "");
  EXPECT_EQ(pg.query("SELECT count(*) FROM t"), "1\n");
}
