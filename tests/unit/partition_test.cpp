#include "xfer/partition.h"

#include <gtest/gtest.h>

using xfer::ChunkKind;
using xfer::partition_files;
using xfer::PartitionConfig;

namespace {
PartitionConfig cfg(uint64_t bdp) {
  PartitionConfig c;
  c.bdp_bytes = bdp;
  return c;
}
}  // namespace

// BDP 2.5 MB (500 Mbit/s x 40 ms): html is Small (< BDP/2), image Medium, video Large (>= 10 BDP).
TEST(Partition, SplitsByBdp) {
  std::vector<uint64_t> sizes;
  for (int i = 0; i < 100; ++i) sizes.push_back(100'000);
  for (int i = 0; i < 10; ++i) sizes.push_back(2'400'000);
  for (int i = 0; i < 3; ++i) sizes.push_back(220'000'000);
  auto chunks = partition_files(sizes, cfg(2'500'000));
  ASSERT_EQ(chunks.size(), 3u);
  EXPECT_EQ(chunks[0].kind, ChunkKind::Small);
  EXPECT_EQ(chunks[0].files.size(), 100u);
  EXPECT_EQ(chunks[1].kind, ChunkKind::Medium);
  EXPECT_EQ(chunks[1].files.size(), 10u);
  EXPECT_EQ(chunks[2].kind, ChunkKind::Large);
  EXPECT_EQ(chunks[2].bytes, 660'000'000u);
  EXPECT_DOUBLE_EQ(chunks[2].avg_size(), 220e6);
}

TEST(Partition, BoundariesAreHalfAndTenBdp) {
  auto chunks = partition_files({499, 500, 9'999, 10'000, 10'000, 10'000, 499, 499, 500, 500}, cfg(1000));
  ASSERT_EQ(chunks.size(), 3u);
  EXPECT_EQ(chunks[0].files, (std::vector<size_t>{0, 6, 7}));   // < 500
  EXPECT_EQ(chunks[1].files, (std::vector<size_t>{1, 2, 8, 9})); // [500, 10000)
  EXPECT_EQ(chunks[2].files, (std::vector<size_t>{3, 4, 5}));   // >= 10000
}

// mergeChunks: one lone small file among large ones joins its neighbour.
TEST(Partition, MergesChunksTooSmallToStandAlone) {
  std::vector<uint64_t> sizes = {100, 50'000, 60'000, 70'000, 80'000};  // one Small, four Medium
  auto chunks = partition_files(sizes, cfg(20'000));
  ASSERT_EQ(chunks.size(), 1u);
  EXPECT_EQ(chunks[0].kind, ChunkKind::Medium);
  EXPECT_EQ(chunks[0].files.size(), 5u);
}

// ... but a lone file holding a large share of the bytes keeps its own chunk.
TEST(Partition, KeepsALoneFileThatCarriesTheBytes) {
  std::vector<uint64_t> sizes(50, 1'000);
  sizes.push_back(500'000'000);
  auto chunks = partition_files(sizes, cfg(100'000));
  ASSERT_EQ(chunks.size(), 2u);
  EXPECT_EQ(chunks[1].kind, ChunkKind::Large);
  EXPECT_EQ(chunks[1].files, (std::vector<size_t>{50}));
}

// With Medium empty, a lone Large file merges across into Small.
TEST(Partition, MergesAcrossAnEmptyMedium) {
  std::vector<uint64_t> sizes(4000, 1'000);
  sizes.push_back(150'000);  // Large (>= 10 BDP), 3.6% of the bytes, one file
  auto chunks = partition_files(sizes, cfg(10'000));
  ASSERT_EQ(chunks.size(), 1u);
  EXPECT_EQ(chunks[0].kind, ChunkKind::Small);
  EXPECT_EQ(chunks[0].files.size(), 4001u);
}

TEST(Partition, MediumJoinsTheCloserNeighbour) {
  // Medium: one file of 800 (avg closer to Small's 300 than to Large's 1e6 on a log scale).
  std::vector<uint64_t> sizes(10, 300);
  for (int i = 0; i < 10; ++i) sizes.push_back(1'000'000);
  sizes.push_back(800);
  auto chunks = partition_files(sizes, cfg(1000));
  ASSERT_EQ(chunks.size(), 2u);
  EXPECT_EQ(chunks[0].kind, ChunkKind::Small);
  EXPECT_EQ(chunks[0].files.size(), 11u);
}
