// The job store: jobs and interval records survive reopening; purge keeps intervals.
#include "store.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <filesystem>

namespace {

std::string temp_db() {
  char t[] = "/tmp/xferd-store-XXXXXX";
  return std::string(mkdtemp(t)) + "/xferd.db";
}

}  // namespace

TEST(Store, JobsAndIntervalsSurviveReopening) {
  std::string db = temp_db();
  uint64_t id;
  {
    xferd::Store s(db);
    xferd::JobRow r;
    r.uid = 65534;
    r.gid = 65534;
    r.dest = "/srv/in";
    r.manifest = "http://127.0.0.1/a 10\n";
    r.policy = "app-min-energy";
    r.submitted_at = 1000;
    id = s.insert(r);
    EXPECT_EQ(r.id, id);
    s.set_state(id, "running");
    xfer::Observation e;
    e.t_s = 5;
    e.throughput_bps = 8e8;
    e.bytes_done = 500;
    e.params.chunks = {{4, 2, 8}, {1, 1, 1}};
    e.params.reason = "because";
    e.joules = 12.5;
    e.energy_source = "model:cpu";
    e.cores = 2;
    e.ext_load = 0.25;
    xfer::FlowInterval f;
    f.rtt_ms = 40;
    f.retrans_per_mb = 0.5;
    e.flow = f;
    s.add_interval(id, 0, "min-energy", e, {"small", "large"}, 2, 1000);
    e.t_s = 10;
    e.flow.reset();
    e.joules.reset();  // no figure: stored as missing, not as 0
    s.add_interval(id, 1, "min-energy", e, {"small", "large"}, 2, 1000);
  }
  xferd::Store s(db);
  std::vector<xferd::JobRow> jobs = s.jobs();
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs[0].state, "running");
  EXPECT_EQ(jobs[0].uid, 65534u);
  EXPECT_TRUE(jobs[0].manifest.empty());  // read one job at a time, not with the list
  EXPECT_EQ(s.manifest(id), "http://127.0.0.1/a 10\n");
  EXPECT_EQ(s.interval_count(id), 2u);

  // The documented columns hold what was recorded.
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open(db.c_str(), &raw), SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(raw,
                               "SELECT cc, p, pp, cores, joules, energy_source, rtt_ms, params FROM intervals "
                               "WHERE job_id=? AND seq=0",
                               -1, &st, nullptr),
            SQLITE_OK);
  sqlite3_bind_int64(st, 1, int64_t(id));
  ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
  EXPECT_EQ(sqlite3_column_int(st, 0), 5);       // channels: 4 + 1
  EXPECT_EQ(sqlite3_column_int(st, 1), 4 * 2 + 1);  // streams
  EXPECT_EQ(sqlite3_column_int(st, 2), 8);       // max pp
  EXPECT_EQ(sqlite3_column_int(st, 3), 2);
  EXPECT_DOUBLE_EQ(sqlite3_column_double(st, 4), 12.5);
  EXPECT_STREQ(reinterpret_cast<const char*>(sqlite3_column_text(st, 5)), "model:cpu");
  EXPECT_DOUBLE_EQ(sqlite3_column_double(st, 6), 40);
  EXPECT_NE(std::string(reinterpret_cast<const char*>(sqlite3_column_text(st, 7))).find("\"kind\":\"small\""),
            std::string::npos);
  sqlite3_finalize(st);
  ASSERT_EQ(sqlite3_prepare_v2(raw, "SELECT ext_load, joules, energy_source FROM intervals WHERE job_id=? ORDER BY seq", -1,
                               &st, nullptr),
            SQLITE_OK);
  sqlite3_bind_int64(st, 1, int64_t(id));
  ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
  EXPECT_DOUBLE_EQ(sqlite3_column_double(st, 0), 0.25);
  ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
  EXPECT_EQ(sqlite3_column_type(st, 1), SQLITE_NULL);
  EXPECT_STREQ(reinterpret_cast<const char*>(sqlite3_column_text(st, 2)), "none");
  sqlite3_finalize(st);
  sqlite3_close(raw);

  s.finish(id, "done", "", "{\"state\":\"done\"}");
  EXPECT_EQ(s.summary(id), "{\"state\":\"done\"}");
  EXPECT_EQ(s.jobs()[0].state, "done");
  EXPECT_GT(s.jobs()[0].finished_at, 0);
  EXPECT_EQ(s.purge_finished_before(1), 0);  // finished now, not before 1970
  EXPECT_EQ(s.purge_finished_before(4e9), 1);
  EXPECT_TRUE(s.jobs().empty());
  EXPECT_EQ(s.interval_count(id), 2u);  // the learning history stays
  std::filesystem::remove_all(std::filesystem::path(db).parent_path());
}

TEST(Store, UnopenablePathSaysWhich) {
  try {
    xferd::Store s("/nonexistent/dir/xferd.db");
    FAIL() << "opened";
  } catch (const xferd::StoreError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/dir/xferd.db"), std::string::npos) << e.what();
  }
}
