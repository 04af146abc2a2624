#include "xfer/datagen.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "xfer/sha256.h"

TEST(Datagen, PaperShapesAndDeterminism) {
  xfer::DatasetSpec spec;
  spec.shape = "html";
  spec.scale = 0.2;  // 1000 files
  auto a = xfer::plan_dataset(spec);
  ASSERT_EQ(a.size(), 1000u);
  double sum = 0, sq = 0;
  for (auto& f : a) {
    EXPECT_GE(f.size, 50'000u);
    EXPECT_LE(f.size, 150'000u);
    sum += double(f.size);
  }
  double mean = sum / a.size();
  for (auto& f : a) sq += (double(f.size) - mean) * (double(f.size) - mean);
  EXPECT_NEAR(mean, 102e3, 4e3);
  EXPECT_NEAR(std::sqrt(sq / a.size()), 29e3, 4e3);
  auto b = xfer::plan_dataset(spec);
  EXPECT_EQ(a[17].size, b[17].size);
  spec.seed = 2;
  EXPECT_NE(xfer::plan_dataset(spec)[17].size, a[17].size);
  spec.shape = "mixed";
  spec.scale = 0.01;
  auto mixed = xfer::plan_dataset(spec);
  EXPECT_EQ(mixed.size(), 50u + 5u + 1u);
  spec.shape = "nope";
  EXPECT_THROW(xfer::plan_dataset(spec), std::invalid_argument);
}

TEST(Datagen, ContentAtAnyOffsetMatchesTheStream) {
  char whole[100], part[37];
  xfer::fill_content(7, "f", 0, whole, sizeof whole);
  xfer::fill_content(7, "f", 13, part, sizeof part);
  EXPECT_EQ(std::string(whole + 13, 37), std::string(part, 37));
  xfer::fill_content(7, "g", 13, part, sizeof part);
  EXPECT_NE(std::string(whole + 13, 37), std::string(part, 37));
}

TEST(Datagen, WritesFilesAndAManifestWithTheirHashes) {
  auto dir = std::filesystem::temp_directory_path() / ("datagen-" + std::to_string(getpid()));
  xfer::DatasetSpec spec;
  spec.shape = "image";
  spec.count = 3;
  spec.size_scale = 0.01;
  auto files = xfer::write_dataset(spec, dir.string());
  ASSERT_EQ(files.size(), 3u);
  std::ifstream in(dir / files[1].name, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_EQ(ss.str().size(), files[1].size);
  EXPECT_EQ(xfer::sha256_hex(ss.str()), files[1].sha256);
  std::string m = xfer::manifest_text(files, "http://x/");
  EXPECT_NE(m.find("http://x/" + files[0].name + " " + std::to_string(files[0].size) + " sha256:" + files[0].sha256),
            std::string::npos);
  std::filesystem::remove_all(dir);
}
