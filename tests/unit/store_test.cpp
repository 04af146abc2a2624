// The job store: jobs survive reopening; a v2 store's intervals move into the history.
#include "store.h"
#include "xfer/history.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <filesystem>

namespace {

// A store in a directory of its own, removed with it.
struct TempDb {
  TempDb() {
    char t[] = "/tmp/xferd-store-XXXXXX";
    dir = mkdtemp(t);
    path = dir + "/xferd.db";
  }
  ~TempDb() { std::filesystem::remove_all(dir); }
  std::string dir, path;
};

}  // namespace

TEST(Store, JobsSurviveReopening) {
  TempDb tmp;
  std::string db = tmp.path;
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
  }
  xferd::Store s(db);
  std::vector<xferd::JobRow> jobs = s.jobs();
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs[0].state, "running");
  EXPECT_EQ(jobs[0].uid, 65534u);
  EXPECT_TRUE(jobs[0].manifest.empty());  // read one job at a time, not with the list
  EXPECT_EQ(s.manifest(id), "http://127.0.0.1/a 10\n");
  EXPECT_TRUE(s.legacy_intervals().empty());  // a new store keeps no intervals: the history does

  s.finish(id, "done", "", "{\"state\":\"done\"}");
  EXPECT_EQ(s.summary(id), "{\"state\":\"done\"}");
  EXPECT_EQ(s.jobs()[0].state, "done");
  EXPECT_GT(s.jobs()[0].finished_at, 0);
  EXPECT_EQ(s.purge_finished_before(1), 0);  // finished now, not before 1970
  EXPECT_EQ(s.purge_finished_before(4e9), 1);
  EXPECT_TRUE(s.jobs().empty());
  std::filesystem::remove_all(std::filesystem::path(db).parent_path());
}

// A version-2 store (as xferd 0.1 left it) holds the intervals itself; they
// move into the history with their figures, NULL staying NULL, and leave
// the store only after.
TEST(Store, AVersion2StoresIntervalsMoveIntoTheHistory) {
  TempDb tmp;
  std::string db = tmp.path;
  {
    sqlite3* raw = nullptr;
    ASSERT_EQ(sqlite3_open(db.c_str(), &raw), SQLITE_OK);
    const char* v2 =
        "CREATE TABLE jobs(id INTEGER PRIMARY KEY, uid INTEGER NOT NULL, gid INTEGER NOT NULL, dest TEXT NOT NULL,"
        " manifest TEXT NOT NULL, policy TEXT NOT NULL, options TEXT NOT NULL, state TEXT NOT NULL,"
        " submitted_at REAL NOT NULL, finished_at REAL, error TEXT NOT NULL DEFAULT '', summary TEXT NOT NULL DEFAULT '');"
        "CREATE TABLE intervals(job_id INTEGER NOT NULL, seq INTEGER NOT NULL, algorithm TEXT NOT NULL,"
        " t_s REAL NOT NULL, throughput_bps REAL NOT NULL, bytes_done INTEGER NOT NULL,"
        " cc INTEGER NOT NULL, p INTEGER NOT NULL, pp INTEGER NOT NULL, params TEXT NOT NULL,"
        " cores INTEGER, freq_khz INTEGER, joules REAL, energy_source TEXT NOT NULL,"
        " rtt_ms REAL, retrans_per_mb REAL, files_total INTEGER NOT NULL, bytes_total INTEGER NOT NULL,"
        " ext_load REAL, cpu_pct REAL, PRIMARY KEY(job_id, seq));"
        "INSERT INTO jobs VALUES(7,0,0,'/srv','m','fast','{}','done',1000,1100,'','');"
        "INSERT INTO intervals VALUES(7,0,'max-throughput',5,8e8,500,5,9,8,'{\"reason\":\"because\"}',2,NULL,12.5,"
        " 'model:cpu',40,0.5,2,1000,0.25,30);"
        "INSERT INTO intervals VALUES(7,1,'max-throughput',10,9e8,900,5,9,8,'{}',2,NULL,NULL,'none',NULL,NULL,2,1000,"
        " NULL,NULL);"
        "INSERT INTO intervals VALUES(8,0,'static',5,1e8,100,1,1,1,'{}',NULL,NULL,1.0,'model:cpu',1,0,1,10,0,5);"
        "PRAGMA user_version=2;";
    ASSERT_EQ(sqlite3_exec(raw, v2, nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(raw);
  }
  std::string hist = std::filesystem::path(db).parent_path() / "history.db";
  {
    xferd::Store s(db);
    std::vector<xfer::hla::LegacyInterval> legacy = s.legacy_intervals();
    ASSERT_EQ(legacy.size(), 3u);
    auto h = xfer::hla::open_history(hist);
    xfer::hla::migrate_legacy(*h, legacy);
    s.drop_legacy_intervals();
  }
  xferd::Store s(db);
  EXPECT_TRUE(s.legacy_intervals().empty());
  auto h = xfer::hla::open_history(hist, {.read_only = true});
  xfer::hla::HistoryData d = h->read();
  ASSERT_EQ(d.runs.size(), 2u);
  ASSERT_EQ(d.intervals.size(), 3u);
  const xfer::hla::RunRow* r7 = d.run_of(d.intervals[0]);
  ASSERT_NE(r7, nullptr);
  EXPECT_EQ(r7->job_id, 7);
  EXPECT_EQ(r7->outcome, "done");
  EXPECT_EQ(r7->policy, "fast");
  EXPECT_EQ(d.run_of(d.intervals[2])->outcome, "unknown");  // job 8's row was purged: its end is not known
  const xfer::hla::IntervalRow& i0 = d.intervals[0];
  EXPECT_EQ(i0.chunk, -1);
  EXPECT_EQ(i0.cc, 5);
  EXPECT_EQ(i0.p, 1);  // 9 streams over 5 channels, as the store summed them
  EXPECT_EQ(i0.pp, 8);
  EXPECT_EQ(i0.cores, 2);
  EXPECT_FALSE(i0.freq_khz.has_value());
  EXPECT_DOUBLE_EQ(*i0.joules, 12.5);
  EXPECT_DOUBLE_EQ(*i0.rtt_ms, 40);
  EXPECT_DOUBLE_EQ(*i0.ext_load, 0.25);
  EXPECT_EQ(i0.reason, "because");
  EXPECT_DOUBLE_EQ(i0.t_unix, 1005);
  EXPECT_FALSE(d.intervals[1].joules.has_value());  // missing stays missing
  EXPECT_FALSE(d.intervals[1].rtt_ms.has_value());
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
