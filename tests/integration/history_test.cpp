// The transfer history (issue 14 §1): the same rows round-trip through both
// backends; with PostgreSQL, a server that stops and starts again mid-job
// loses no row and holds each once; a server that cannot be reached delays
// no transfer (rows wait in the journal and ship at the next run).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <sqlite3.h>
#include <thread>

#include "fixture.h"
#include "postgres.h"
#include "xfer/history.h"

namespace fs = std::filesystem;
using namespace xfer::hla;
using xtest::bin;
using xtest::capture;
using xtest::make_temp_dir;

namespace {

RunRow sample_run(const std::string& run) {
  RunRow r;
  r.node = "node-a", r.run = run, r.tool = "xferctl", r.job_id = 42, r.policy = "fast", r.algorithm = "max-throughput";
  r.label = "label with 'quotes' and \"dq\"";
  r.source_origin = "http://10.0.0.1:8080", r.dest_host = "node-a", r.link_mbps = 300, r.link_source = "configured";
  r.handshake_rtt_ms = 60.5, r.loss_pct = 0.01, r.files = 600, r.bytes = 61440000, r.size_mean = 102400;
  r.size_sd = 2048.25, r.cores_present = 2, r.freq_levels = 0, r.started_unix = 1.7e9 + 0.125;
  r.finished_unix = 1.7e9 + 60, r.outcome = "done";
  return r;
}

IntervalRow sample_interval(const std::string& run, int seq, int chunk, bool with_flow) {
  IntervalRow i;
  i.node = "node-a", i.run = run, i.seq = seq, i.chunk = chunk, i.t_unix = 1.7e9 + seq, i.t_s = seq * 5.0;
  i.interval_s = 5.0, i.settling = seq == 0, i.chunk_kind = chunk ? "large" : "small";
  i.throughput_bps = 1.234567890123e8 + seq, i.job_throughput_bps = 2e8, i.bytes_interval = 77160000 + seq;
  i.joules = 10.0 / 3, i.dynamic_joules = 1.5, i.job_joules = 20, i.energy_source = "model:cpu";
  if (with_flow) i.rtt_ms = 60.25, i.delta_rtt_ms = -0.5, i.retrans_per_mb = 0.125, i.flows = 8;
  i.ext_load = 0.3, i.cpu_pct = 12.5, i.cores = 2;
  i.cc = 8, i.p = 2, i.pp = 4, i.chunk_files = 500, i.chunk_bytes = 51200000, i.chunk_size_mean = 102400;
  i.chunk_size_sd = 100.5, i.reason = "cc 8: ¼ of BDP; \"quoted\"";
  return i;
}

void expect_same(const RunRow& a, const RunRow& b) {
  EXPECT_EQ(a.node, b.node);
  EXPECT_EQ(a.run, b.run);
  EXPECT_EQ(a.tool, b.tool);
  EXPECT_EQ(a.job_id, b.job_id);
  EXPECT_EQ(a.label, b.label);
  EXPECT_EQ(a.source_origin, b.source_origin);
  EXPECT_EQ(a.link_source, b.link_source);
  EXPECT_DOUBLE_EQ(a.handshake_rtt_ms, b.handshake_rtt_ms);
  EXPECT_EQ(a.loss_pct, b.loss_pct);
  EXPECT_EQ(a.files, b.files);
  EXPECT_DOUBLE_EQ(a.size_sd, b.size_sd);
  EXPECT_DOUBLE_EQ(a.started_unix, b.started_unix);
  EXPECT_EQ(a.outcome, b.outcome);
}

void expect_same(const IntervalRow& a, const IntervalRow& b) {
  EXPECT_EQ(a.run, b.run);
  EXPECT_EQ(a.seq, b.seq);
  EXPECT_EQ(a.chunk, b.chunk);
  EXPECT_EQ(a.settling, b.settling);
  EXPECT_EQ(a.chunk_kind, b.chunk_kind);
  EXPECT_EQ(a.throughput_bps, b.throughput_bps);  // exactly: numbers round-trip
  EXPECT_EQ(a.joules, b.joules);
  EXPECT_EQ(a.dynamic_joules, b.dynamic_joules);
  EXPECT_EQ(a.rtt_ms, b.rtt_ms);
  EXPECT_EQ(a.delta_rtt_ms, b.delta_rtt_ms);
  EXPECT_EQ(a.flows, b.flows);
  EXPECT_EQ(a.freq_khz, b.freq_khz);  // NULL stays NULL
  EXPECT_EQ(a.cores, b.cores);
  EXPECT_EQ(a.cc, b.cc);
  EXPECT_EQ(a.p, b.p);
  EXPECT_EQ(a.pp, b.pp);
  EXPECT_EQ(a.chunk_size_sd, b.chunk_size_sd);
  EXPECT_EQ(a.reason, b.reason);
}

void round_trip(History& w, const std::function<std::unique_ptr<History>()>& reopen) {
  RunRow r = sample_run("xferctl/1/1");
  r.outcome = "running";
  w.put_run(r);
  std::vector<IntervalRow> rows;
  for (int s = 0; s < 3; ++s)
    for (int c = 0; c < 2; ++c) rows.push_back(sample_interval(r.run, s, c, s != 1));
  w.append(rows);
  w.append({rows[0], rows[3]});  // the same keys again: stored once, unchanged
  r.outcome = "done";            // the run's end replaces its row
  w.put_run(r);
  ASSERT_TRUE(w.flush(20)) << w.ship_error();
  std::unique_ptr<History> h = reopen();
  HistoryData d = h->read();
  ASSERT_EQ(d.runs.size(), 1u);
  expect_same(d.runs[0], r);
  ASSERT_EQ(d.intervals.size(), rows.size());
  for (size_t i = 0; i < rows.size(); ++i) expect_same(d.intervals[i], rows[i]);
}

// Rows in a table; -1 before the table exists.
int64_t pg_count(const xtest::PgServer& pg, const std::string& table) {
  std::string n = pg.query("SELECT count(*) FROM " + table);
  return n.empty() || !isdigit(static_cast<unsigned char>(n[0])) ? -1 : std::stoll(n);
}

// Starts a shell command; returns its pid.
pid_t spawn(const std::string& cmd) {
  pid_t pid = fork();
  if (pid == 0) {
    execl("/bin/sh", "sh", "-c", cmd.c_str(), nullptr);
    _exit(127);
  }
  return pid;
}

}  // namespace

TEST(History, RowsRoundTripThroughSqlite) {
  std::string dir = make_temp_dir("hist");
  std::string path = dir + "/history.db";
  auto w = open_history(path);
  round_trip(*w, [&] { return open_history(path, {.read_only = true}); });
  fs::remove_all(dir);
}

// A writer's options for a PostgreSQL history: its journal in dir.
static HistoryOptions journal_in(const std::string& dir) {
  HistoryOptions o;
  o.journal = dir + "/journal.db";
  return o;
}

TEST(History, RowsRoundTripThroughPostgres) {
  xtest::PgServer pg;
  std::string dir = make_temp_dir("hist");
  auto w = open_history(pg.url(), journal_in(dir));
  round_trip(*w, [&] { return open_history(pg.url(), {.read_only = true}); });
  EXPECT_EQ(pg_count(pg, "hla_intervals"), 6);
  EXPECT_EQ(w->unshipped(), 0u);
  fs::remove_all(dir);
}

// A fleet's history is compacted on the server itself (xfer-hla compact
// with the URL): the old runs fold there, in one transaction a batch, and
// the analysis reads the folded rows back.
TEST(History, APostgresHistoryIsCompactedOnTheServer) {
  xtest::PgServer pg;
  std::string dir = make_temp_dir("hist");
  {
    auto w = open_history(pg.url(), journal_in(dir));
    for (int n = 0; n < 4; ++n) {
      RunRow r = sample_run("xferd/" + std::to_string(n) + "/1");
      r.started_unix = 1.7e9 + n * 86400, r.finished_unix = r.started_unix + 20;
      w->put_run(r);
      std::vector<IntervalRow> rows;
      for (int s = 0; s < 4; ++s) {
        IntervalRow i = sample_interval(r.run, s, 0, true);
        i.t_unix = r.started_unix + 5 * (s + 1);
        rows.push_back(i);
      }
      w->append(rows);
    }
    ASSERT_TRUE(w->flush(20)) << w->ship_error();
  }
  EXPECT_EQ(pg_count(pg, "hla_intervals"), 16);
  // The journal keeps what is still to ship, not the past: the server has
  // these runs, which ended over a day ago, and its shipper drops them.
  {
    auto j = open_history(dir + "/journal.db", {.read_only = true});
    EXPECT_EQ(j->read().intervals.size(), 0u) << "shipped rows of old runs left in the journal";
  }
  std::string c = capture(bin("xfer-hla") + " compact --history '" + pg.url() + "' --keep-days 1 2>&1; echo rc=$?");
  EXPECT_NE(c.find("rc=0"), std::string::npos) << c;
  EXPECT_NE(c.find("folded: 4 runs that ended done (16 interval rows) into hla_folded, 1 rows there"), std::string::npos)
      << c;
  EXPECT_EQ(pg_count(pg, "hla_intervals"), 0);
  EXPECT_EQ(pg_count(pg, "hla_runs"), 0);
  EXPECT_EQ(pg_count(pg, "hla_folded"), 1);
  auto r = open_history(pg.url(), {.read_only = true});
  HistoryData d = r->read();
  ASSERT_EQ(d.folded.size(), 1u);
  EXPECT_EQ(d.folded[0].visits, 4);
  EXPECT_EQ(d.folded[0].intervals, 12) << "each run's first interval settles";
  fs::remove_all(dir);
}

// A real job (xferctl run) with a PostgreSQL history; the server stops
// mid-job and comes back: every row the journal holds reaches the server,
// each once, and the transfer was never held up. Shipping the whole journal
// a second time changes nothing on the server.
TEST(History, PostgresStoppedMidJobLosesNoRow) {
  xtest::set_link_rate(40);
  xtest::PgServer pg;
  xtest::Dataset d = xtest::dataset(40, 6, 0);  // ~18 MB: about 4 s at 40 Mbit/s
  xtest::Nginx nginx(d.dir);
  std::string work = make_temp_dir("histjob");
  std::ofstream(work + "/m") << d.manifest(nginx.url(false, "/"));
  std::string journal = work + "/journal.db";
  fs::create_directory(work + "/in");
  auto t0 = std::chrono::steady_clock::now();
  pid_t p = spawn(bin("xferctl") + " run --manifest " + work + "/m --dest " + work + "/in --sla static --cc 4 " +
                  "--interval-ms 200 --no-progress --history '" + pg.url() + "' --history-journal " + journal +
                  " --json > " + work + "/out 2> " + work + "/err");
  // The server goes away once the shipper has shipped some rows.
  int64_t before_stop = -1;
  for (int i = 0; i < 80 && before_stop <= 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    before_stop = pg_count(pg, "hla_intervals");
  }
  pg.stop();
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  pg.start();
  int st = 0;
  waitpid(p, &st, 0);
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << capture("cat " + work + "/err");
  xtest::expect_identical(d, work + "/in");
  EXPECT_LT(took, 20) << "the transfer waited on the history";

  auto j = open_history(journal, {.read_only = true});
  HistoryData local = j->read();
  ASSERT_EQ(local.runs.size(), 1u);
  EXPECT_EQ(local.runs[0].outcome, "done");
  EXPECT_EQ(local.runs[0].files, int64_t(d.files.size()));
  EXPECT_GE(local.intervals.size(), 8u) << "a 4-s job at 200-ms intervals";
  std::cout << "[ history ] " << local.intervals.size() << " rows; " << before_stop
            << " on the server before it stopped; job took " << took << " s\n";
  EXPECT_GT(before_stop, 0) << "the shipper was shipping before the stop";
  EXPECT_LT(before_stop, int64_t(local.intervals.size())) << "the stop came mid-job";
  EXPECT_EQ(pg_count(pg, "hla_intervals"), int64_t(local.intervals.size())) << capture("cat " + work + "/err");
  EXPECT_EQ(pg.query("SELECT outcome FROM hla_runs"), "done\n");
  // Every row of the journal is on the server, with its figures.
  auto server = open_history(pg.url(), {.read_only = true});
  HistoryData remote = server->read();
  ASSERT_EQ(remote.intervals.size(), local.intervals.size());
  for (size_t i = 0; i < local.intervals.size(); ++i) expect_same(remote.intervals[i], local.intervals[i]);

  // Ship everything again (as after a crash between the server's commit and
  // the journal's mark): the keys keep one copy.
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open(journal.c_str(), &raw), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(raw, "UPDATE hla_intervals SET shipped_rev=0; UPDATE hla_runs SET shipped_rev=0", nullptr,
                         nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(raw);
  {
    HistoryOptions o;
    o.journal = journal;
    auto again = open_history(pg.url(), o);
    EXPECT_GT(again->unshipped(), 0u);
    ASSERT_TRUE(again->flush(20)) << again->ship_error();
  }
  EXPECT_EQ(pg_count(pg, "hla_intervals"), int64_t(local.intervals.size()));
  fs::remove_all(work);
}

// A PostgreSQL URL that cannot connect: the job runs as fast as without
// one, its rows wait in the journal and the user is told; the next run
// with a reachable server ships them.
TEST(History, AnUnreachableServerDelaysNoTransfer) {
  xtest::set_link_rate(40);  // about a second: several 200-ms intervals
  xtest::Dataset d = xtest::dataset(10, 1, 0);
  xtest::Nginx nginx(d.dir);
  std::string work = make_temp_dir("histdown");
  std::ofstream(work + "/m") << d.manifest(nginx.url(false, "/"));
  std::string journal = work + "/journal.db";
  std::string nowhere = "postgresql://postgres@/postgres?host=" + work + "&port=1";
  fs::create_directory(work + "/in");
  int rc = xtest::sh(bin("xferctl") + " run --manifest " + work + "/m --dest " + work + "/in --sla static --cc 2 " +
                     "--interval-ms 200 --no-progress --history '" + nowhere + "' --history-journal " + journal +
                     " > /dev/null 2> " + work + "/err");
  std::string err = capture("cat " + work + "/err");
  EXPECT_EQ(rc, 0) << err;
  xtest::expect_identical(d, work + "/in");
  EXPECT_NE(err.find("wait in the journal"), std::string::npos) << err;
  auto j = open_history(journal, {.read_only = true});
  HistoryData local = j->read();
  ASSERT_EQ(local.runs.size(), 1u);
  EXPECT_GE(local.intervals.size(), 1u);

  xtest::PgServer pg;  // the fleet's server is there now
  {
    HistoryOptions o;
    o.journal = journal;
    auto h = open_history(pg.url(), o);
    ASSERT_TRUE(h->flush(20)) << h->ship_error();
  }
  EXPECT_EQ(pg_count(pg, "hla_intervals"), int64_t(local.intervals.size()));
  fs::remove_all(work);
}

// Bad histories are refused with the reason, nothing written.
TEST(History, BadHistoriesAreRefusedWithTheReason) {
  std::string dir = make_temp_dir("histbad");
  auto refused = [](const std::string& where, HistoryOptions o, const std::string& words) {
    try {
      open_history(where, o);
      ADD_FAILURE() << where << " was opened";
    } catch (const HistoryError& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  refused(dir + "/none.db", {.read_only = true}, "no such file");
  refused(dir, {}, "not a regular file");
  {
    sqlite3* raw = nullptr;
    sqlite3_open((dir + "/other.db").c_str(), &raw);
    sqlite3_exec(raw, "CREATE TABLE jobs(id INTEGER)", nullptr, nullptr, nullptr);
    sqlite3_close(raw);
  }
  refused(dir + "/other.db", {}, "not a transfer history");
  {
    auto h = open_history(dir + "/future.db");
  }
  {
    sqlite3* raw = nullptr;
    sqlite3_open((dir + "/future.db").c_str(), &raw);
    sqlite3_exec(raw, "UPDATE hla_meta SET value='99' WHERE key='schema_version'", nullptr, nullptr, nullptr);
    sqlite3_close(raw);
  }
  refused(dir + "/future.db", {}, "schema version 99");
  refused("postgresql://postgres@/postgres?host=" + dir + "&port=1", {.read_only = true}, "cannot connect");
  refused("postgresql://u:secret@/postgres?host=" + dir + "&port=1", {}, "needs a local journal");
  try {
    open_history("postgresql://u:secret@/postgres?host=" + dir + "&port=1", {.read_only = true});
  } catch (const HistoryError& e) {
    EXPECT_EQ(std::string(e.what()).find("secret"), std::string::npos) << "a password in a message: " << e.what();
  }
  refused("ftp://x/y", {}, "not a file path or a postgresql:// URL");
  fs::remove_all(dir);
}
