// The history's retention (issue 55: a history that stays bounded as the
// machine lives): runs past the window are folded into per-setting rows
// the analysis reads as samples; what it learns from them is what it
// learned from the rows; their weight halves with age; the oldest fold
// first past a row bound; a version 1 history is read and upgraded; a
// journal refuses to fold (the server's history is compacted instead).
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <map>

#include "xfer/history.h"
#include "xfer/hla.h"

namespace fs = std::filesystem;
using namespace xfer::hla;

namespace {

constexpr double kDay = 86400, kT0 = 1.8e9;

std::string temp_dir() {
  std::string t = (fs::temp_directory_path() / "xfer-retention-XXXXXX").string();
  return mkdtemp(t.data()) ? t : throw std::runtime_error("mkdtemp failed");
}

// Three settings on one path, each with its own rate; a run per half-day.
struct Year {
  std::string dir = temp_dir();
  std::string path = dir + "/history.db";
  std::unique_ptr<History> h = open_history(path);
  ~Year() { fs::remove_all(dir); }

  // A run of `rows` one-second intervals at cc; its first one settling.
  void run(int n, double start, int cc, const std::string& outcome = "done", int rows = 8) {
    RunRow r;
    r.node = "n", r.run = "xferd/" + std::to_string(n), r.tool = "xferd", r.policy = "p", r.algorithm = "static";
    r.source_origin = "http://10.0.0.1:80", r.dest_host = "n", r.link_mbps = 1000, r.link_source = "configured";
    r.handshake_rtt_ms = 40 + 0.01 * (n % 7), r.loss_pct = 0.01, r.files = 100, r.bytes = 100'000'000;
    r.size_mean = 1e6, r.size_sd = 1e5, r.cores_present = 2, r.started_unix = start;
    r.finished_unix = outcome == "running" ? 0 : start + rows, r.outcome = outcome;
    h->put_run(r);
    std::vector<IntervalRow> iv;
    for (int s = 0; s < rows; ++s) {
      IntervalRow i;
      i.node = r.node, i.run = r.run, i.seq = s, i.chunk = 0, i.t_unix = start + s + 1, i.t_s = s + 1;
      i.interval_s = 1, i.settling = s == 0, i.chunk_kind = "medium";
      const double mbps = 100.0 * cc + (s % 2 ? 3 : -3);
      i.throughput_bps = i.job_throughput_bps = mbps * 1e6;
      i.bytes_interval = int64_t(mbps * 1e6 / 8);
      i.dynamic_joules = 2.0 + cc, i.joules = 20.0, i.energy_source = "model:cpu";
      i.ext_load = 0.1, i.cores = 2, i.cc = cc, i.p = 1, i.pp = 1;
      i.chunk_files = 100, i.chunk_bytes = 100'000'000, i.chunk_size_mean = 1e6, i.chunk_size_sd = 1e5;
      iv.push_back(i);
    }
    h->append(iv);
  }
  // Forty runs over twenty days, cc 1, 2 and 4 in turn; two failed old
  // ones; one cut off (running) long ago.
  void fill() {
    for (int n = 0; n < 40; ++n) run(n, kT0 + n * kDay / 2, 1 << (n % 3));
    run(100, kT0 + 1 * kDay, 2, "failed");
    run(101, kT0 + 2 * kDay, 2, "cancelled");
    run(102, kT0 + 3 * kDay, 2, "running");
  }
};

std::map<int, MeasuredSetting> settings(const HistoryData& d) {
  Preprocessed p = preprocess(d);
  std::vector<size_t> all(p.samples.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = i;
  std::map<int, MeasuredSetting> out;
  for (const MeasuredSetting& m : measured_settings(p.samples, all)) out[m.knobs.cc] = m;
  return out;
}

}  // namespace

TEST(Retention, OldRunsFoldAndTheAnalysisLearnsTheSameFromThem) {
  Year y;
  y.fill();
  const HistoryData before = y.h->read();
  const double now = kT0 + 20 * kDay;
  Retention keep;
  keep.keep_days = 7;
  keep.half_life_days = 1e12;  // no decay: the same figures
  CompactReport c = compact(*y.h, keep, now);
  // Runs that ended before day 13: 26 done (two a day), 2 that did not end
  // done; the one cut off stays whatever its age.
  EXPECT_EQ(c.runs_folded, 26u);
  EXPECT_EQ(c.rows_folded, 26u * 8);
  EXPECT_EQ(c.runs_dropped, 2u);
  EXPECT_EQ(c.folded_before, 0u);
  EXPECT_EQ(c.folded_after, 3u) << "one folded row per setting of the one path and size class";
  EXPECT_EQ(c.runs_left, 40u - 26 + 1);
  const HistoryData after = y.h->read();
  EXPECT_EQ(after.runs.size(), c.runs_left);
  EXPECT_EQ(after.intervals.size(), c.rows_left);
  EXPECT_EQ(after.intervals.size(), (40u - 26 + 1) * 8);
  ASSERT_EQ(after.folded.size(), 3u);
  for (const FoldedRow& f : after.folded) EXPECT_EQ(f.path, "10.0.0.1 -> n") << f.key;
  // What the analysis measures per setting is what it measured on the rows.
  auto a = settings(before), b = settings(after);
  ASSERT_EQ(a.size(), 3u);
  ASSERT_EQ(b.size(), 3u);
  for (auto& [cc, m] : a) {
    EXPECT_NEAR(b[cc].mbps, m.mbps, 1e-9 * m.mbps) << "cc " << cc;
    EXPECT_NEAR(b[cc].seconds, m.seconds, 1e-6) << "cc " << cc;
    EXPECT_NEAR(b[cc].j_per_gb, m.j_per_gb, 1e-9 * m.j_per_gb) << "cc " << cc;
  }
  // Again, the next day: the folded rows grow in weight, not in number.
  CompactReport again = compact(*y.h, keep, now + kDay);
  EXPECT_EQ(again.folded_before, 3u);
  EXPECT_EQ(again.folded_after, 3u);
  EXPECT_EQ(again.runs_folded, 2u);
  auto c2 = settings(y.h->read());
  for (auto& [cc, m] : a) EXPECT_NEAR(c2[cc].seconds, m.seconds, 1e-6) << "nothing counted twice";
}

TEST(Retention, AFoldedFigureWeighsHalfAfterAHalfLife) {
  Year y;
  for (int n = 0; n < 6; ++n) y.run(n, kT0 + n * 10, 2);
  Retention keep;
  keep.keep_days = 0;
  keep.half_life_days = 30;
  compact(*y.h, keep, kT0 + 100);
  std::vector<FoldedRow> f = y.h->read_folded();
  ASSERT_EQ(f.size(), 1u);
  const FoldedRow later = decayed(f[0], f[0].decayed_to + 30 * kDay);
  EXPECT_NEAR(later.seconds, f[0].seconds / 2, 1e-9 * f[0].seconds);
  EXPECT_NEAR(later.gb, f[0].gb / 2, 1e-9 * f[0].gb);
  const Sample s = folded_sample(f[0]), t = folded_sample(later);
  EXPECT_NEAR(t.mbps, s.mbps, 1e-9 * s.mbps) << "the rate is the same, its weight halves";
  EXPECT_NEAR(s.mbps, 200, 1);
  // A new run 30 days on: the analysis weighs the folded setting at half.
  y.run(50, f[0].decayed_to + 30 * kDay, 2);
  Preprocessed p = preprocess(y.h->read());
  ASSERT_EQ(p.folded, 1u);
  EXPECT_NEAR(p.samples.back().seconds, f[0].seconds / 2, 0.01 * f[0].seconds);
}

TEST(Retention, PastTheRowBoundTheOldestRunsFoldFirst) {
  Year y;
  y.fill();
  Retention keep;
  keep.keep_days = 365;  // all within the window...
  keep.keep_rows = 100;  // ...but at most 100 rows
  CompactReport c = compact(*y.h, keep, kT0 + 20 * kDay);
  EXPECT_LE(c.rows_left, 100u);
  EXPECT_GT(c.rows_left, 100u - 8);
  const HistoryData d = y.h->read();
  double oldest_kept = 1e300;
  for (const RunRow& r : d.runs)
    if (r.outcome != "running") oldest_kept = std::min(oldest_kept, r.started_unix);
  EXPECT_GE(oldest_kept, kT0 + 28 * kDay / 2) << "runs left are the newest";
  bool cut_off_kept = false;
  for (const RunRow& r : d.runs) cut_off_kept = cut_off_kept || r.outcome == "running";
  EXPECT_TRUE(cut_off_kept) << "a run still running never folds";
}

TEST(Retention, AVersionOneHistoryIsReadAndUpgraded) {
  Year y;
  y.run(1, kT0, 2);
  y.h.reset();
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open(y.path.c_str(), &raw), SQLITE_OK);
  sqlite3_exec(raw, "DROP TABLE hla_folded; UPDATE hla_meta SET value='1' WHERE key='schema_version'", nullptr, nullptr,
               nullptr);
  sqlite3_close(raw);
  {
    auto r = open_history(y.path, {.read_only = true});
    HistoryData d = r->read();
    EXPECT_EQ(d.intervals.size(), 8u);
    EXPECT_TRUE(d.folded.empty());
  }
  auto w = open_history(y.path);
  EXPECT_TRUE(w->read_folded().empty());
  ASSERT_EQ(sqlite3_open(y.path.c_str(), &raw), SQLITE_OK);
  sqlite3_stmt* s = nullptr;
  sqlite3_prepare_v2(raw, "SELECT value FROM hla_meta WHERE key='schema_version'", -1, &s, nullptr);
  ASSERT_EQ(sqlite3_step(s), SQLITE_ROW);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(sqlite3_column_text(s, 0))), "2");
  sqlite3_finalize(s);
  sqlite3_close(raw);
  Retention keep;
  keep.keep_days = 0;
  EXPECT_EQ(compact(*w, keep, kT0 + kDay).runs_folded, 1u);
}

TEST(Retention, AJournalRefusesToFold) {
  Year y;
  y.h.reset();
  HistoryOptions o;
  o.journal = y.dir + "/journal.db";
  o.connect_timeout_s = 1;
  {
    auto j = open_history("postgresql://u@/none?host=" + y.dir + "&port=1", o);
  }
  auto as_file = open_history(o.journal);
  try {
    as_file->fold({}, {});
    ADD_FAILURE() << "a journal folded";
  } catch (const HistoryError& e) {
    EXPECT_NE(std::string(e.what()).find("the journal of postgresql://u@/none"), std::string::npos) << e.what();
  }
}
