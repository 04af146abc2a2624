// hla/cache.cpp: FastHLA's parameter cache, a job's place in the table
// (path tier, then dataset tier, then the external-load band).
#include <gtest/gtest.h>

#include "xfer/hla.h"

using namespace xfer::hla;

namespace {

TableStratum stratum(const std::string& id, double rtt, double bytes, double lo, double hi) {
  TableStratum s;
  s.id = id;
  s.link_mbps = 1000, s.rtt_ms = rtt;
  s.files = bytes / 1e6, s.bytes = bytes, s.size_mean = 1e6, s.size_sd = 1e5;
  s.load_lo = lo, s.load_hi = hi;
  return s;
}

// Two paths (10 ms, 100 ms); the second has two datasets, the first of
// them in three load bands (listed out of order).
ParamTable table() {
  ParamTable t;
  t.strata = {stratum("P1/D1/L1", 10, 1e9, 0, 1),           stratum("P2/D1/L3", 100, 1e9, 0.5, 1),
              stratum("P2/D1/L1", 100, 1e9, 0, 0.2),        stratum("P2/D1/L2", 100, 1e9, 0.2, 0.5),
              stratum("P2/D2/L1", 100, 1e11, 0, 1)};
  return t;
}

Query query(double rtt, double bytes, double load) {
  Query q;
  q.link_mbps = 1000, q.rtt_ms = rtt, q.bytes = bytes, q.files = bytes / 1e6, q.size_mean = 1e6, q.size_sd = 1e5;
  q.ext_load = load;
  return q;
}

}  // namespace

TEST(Cache, AJobFindsItsPathThenItsDatasetThenItsLoadBand) {
  ParamTable t = table();
  std::optional<CacheHit> hit = lookup(t, query(105, 1.1e9, 0.3));
  ASSERT_TRUE(hit.has_value());
  ASSERT_EQ(hit->bands.size(), 3u);
  EXPECT_EQ(hit->bands[0]->id, "P2/D1/L1") << "bands lightest first";
  EXPECT_EQ(hit->bands[1]->id, "P2/D1/L2");
  EXPECT_EQ(hit->bands[2]->id, "P2/D1/L3");
  EXPECT_EQ(hit->band, 1u) << "load 0.3 is in [0.2, 0.5)";
  EXPECT_GT(hit->path_distance, 0);
  EXPECT_LT(hit->path_distance, kPathCut);
  EXPECT_EQ(lookup(t, query(100, 1e9, 0.9))->band, 2u);
  EXPECT_EQ(lookup(t, query(100, 1e9, -1))->band, 0u) << "no load known: the light surface first";
  // The other dataset of the same path.
  hit = lookup(t, query(100, 9e10, 0));
  ASSERT_TRUE(hit.has_value());
  ASSERT_EQ(hit->bands.size(), 1u);
  EXPECT_EQ(hit->bands[0]->id, "P2/D2/L1");
  // The other path.
  hit = lookup(t, query(11, 1e9, 0.5));
  ASSERT_TRUE(hit.has_value());
  EXPECT_EQ(hit->bands[0]->id, "P1/D1/L1");
}

TEST(Cache, APathOrADatasetTooFarIsAMiss) {
  ParamTable t = table();
  EXPECT_FALSE(lookup(t, query(30, 1e9, 0)).has_value()) << "30 ms is near neither 10 nor 100 ms";
  EXPECT_FALSE(lookup(t, query(100, 1e5, 0)).has_value()) << "100 KB is near neither dataset";
  EXPECT_FALSE(lookup(ParamTable{}, query(100, 1e9, 0)).has_value()) << "an empty table";
}

TEST(Cache, ALinkRateOrLossNotMeasuredYetIsLeftOutOfThePathMatch) {
  // The strata's link rate was measured at 1000 Mbit/s; a job that has not
  // measured its own yet (0) is matched on the RTT (and loss) it knows; with
  // an assumed 10 Gbit/s it would be a miss.
  ParamTable t = table();
  Query q = query(100, 1e9, 0.3);
  q.link_mbps = 10000;
  EXPECT_FALSE(lookup(t, q).has_value());
  q.link_mbps = 0;
  std::optional<CacheHit> hit = lookup(t, q);
  ASSERT_TRUE(hit.has_value());
  EXPECT_EQ(hit->bands[hit->band]->id, "P2/D1/L2");
  // A lossy path measured as such no longer matches the lossless strata;
  // not measured, it does.
  q.loss_pct = 1;
  EXPECT_FALSE(lookup(t, q).has_value());
  q.loss_pct = -1;
  EXPECT_TRUE(lookup(t, q).has_value());
}
