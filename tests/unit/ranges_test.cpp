#include "xfer/ranges.h"

#include <gtest/gtest.h>

using xfer::Range;
using xfer::RangeSet;

TEST(RangeSet, MergesOverlapsAndNeighbours) {
  RangeSet s;
  s.add({10, 20});
  s.add({30, 40});
  s.add({20, 25});  // touches the first
  ASSERT_EQ(s.ranges().size(), 2u);
  EXPECT_EQ(s.ranges()[0], (Range{10, 25}));
  s.add({5, 35});  // swallows both
  ASSERT_EQ(s.ranges().size(), 1u);
  EXPECT_EQ(s.ranges()[0], (Range{5, 40}));
  EXPECT_EQ(s.bytes(), 35u);
}

TEST(RangeSet, OutOfOrderAddsStaySorted) {
  RangeSet s;
  s.add({100, 110});
  s.add({0, 10});
  s.add({50, 60});
  EXPECT_EQ(s.to_string(), "0-10,50-60,100-110");
  EXPECT_TRUE(s.contains({52, 58}));
  EXPECT_FALSE(s.contains({55, 65}));
  EXPECT_FALSE(s.contains({10, 11}));
}

TEST(RangeSet, MissingListsTheGaps) {
  RangeSet s;
  s.add({0, 10});
  s.add({20, 30});
  auto gaps = s.missing(40);
  ASSERT_EQ(gaps.size(), 2u);
  EXPECT_EQ(gaps[0], (Range{10, 20}));
  EXPECT_EQ(gaps[1], (Range{30, 40}));
  EXPECT_TRUE(RangeSet().missing(0).empty());
  EXPECT_EQ(RangeSet().missing(7).at(0), (Range{0, 7}));
}

TEST(RangeSet, TextRoundTripAndRejectsGarbage) {
  RangeSet s;
  s.add({0, 1048576});
  s.add({2097152, 4194304});
  EXPECT_EQ(RangeSet::parse(s.to_string()).ranges(), s.ranges());
  EXPECT_TRUE(RangeSet::parse("").empty());
  EXPECT_THROW(RangeSet::parse("5"), std::invalid_argument);
  EXPECT_THROW(RangeSet::parse("9-3"), std::invalid_argument);
  EXPECT_THROW(RangeSet::parse("1-2,x-4"), std::invalid_argument);
}

TEST(SplitRange, EqualPiecesCoveringTheRange) {
  auto v = xfer::split_range({0, 1000}, 4, 10);
  ASSERT_EQ(v.size(), 4u);
  EXPECT_EQ(v[0], (Range{0, 250}));
  EXPECT_EQ(v[3], (Range{750, 1000}));
  auto w = xfer::split_range({5, 15}, 3, 1);  // 10 bytes in 3: 4+3+3
  ASSERT_EQ(w.size(), 3u);
  EXPECT_EQ(w[0], (Range{5, 9}));
  EXPECT_EQ(w[1], (Range{9, 12}));
  EXPECT_EQ(w[2], (Range{12, 15}));
}

TEST(SplitRange, NeverBelowTheMinimumPiece) {
  EXPECT_EQ(xfer::split_range({0, 1000}, 8, 400).size(), 2u);  // 1000/400 = 2 pieces at most
  EXPECT_EQ(xfer::split_range({0, 100}, 8, 400).size(), 1u);   // smaller than one piece: whole
  EXPECT_EQ(xfer::split_range({0, 100}, 0, 1).size(), 1u);     // n < 1 means 1
  EXPECT_TRUE(xfer::split_range({7, 7}, 4, 1).empty());
}
