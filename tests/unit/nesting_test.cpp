// libxfer/util/nesting.cpp: the nesting of JSON and TOML is measured without
// recursion, before a parser (which recurses) sees the text.
#include <gtest/gtest.h>

#include "xfer/nesting.h"

TEST(Nesting, JsonDepthSkipsStrings) {
  EXPECT_EQ(xfer::json_nesting("{}"), 1u);
  EXPECT_EQ(xfer::json_nesting(R"({"a": [1, {"b": [[]]}]})"), 5u);
  EXPECT_EQ(xfer::json_nesting(R"({"a": "[[[[{{{{", "b": "\"[["})"), 1u);
  EXPECT_EQ(xfer::json_nesting("42"), 0u);
  EXPECT_EQ(xfer::json_nesting(std::string(1000000, '[')), 1000000u);
}

TEST(Nesting, DeepJsonIsRefusedBeforeItIsParsed) {
  std::string deep = std::string(100000, '[') + std::string(100000, ']');
  try {
    xfer::parse_json_bounded(deep, "table.json");
    FAIL() << "accepted";
  } catch (const xfer::NestingError& e) {
    EXPECT_STREQ(e.what(), "table.json: nested 100000 levels deep; xferd reads at most 64");
  }
  std::string ok = std::string(64, '[') + std::string(64, ']');
  EXPECT_TRUE(xfer::parse_json_bounded(ok, "x").is_array());
  EXPECT_THROW(xfer::parse_json_bounded("[" + ok + "]", "x"), xfer::NestingError);
  EXPECT_TRUE(xfer::parse_json_bounded("{not json", "x").is_discarded());
}

TEST(Nesting, TomlCountsHeadersDottedKeysAndContainers) {
  EXPECT_EQ(xfer::toml_nesting("a = 1\n"), 1u);
  EXPECT_EQ(xfer::toml_nesting("[daemon]\ninterval_ms = 500\n"), 2u);
  EXPECT_EQ(xfer::toml_nesting("[policy.fast]\nalgorithm = \"max-throughput\"\n"), 3u);
  EXPECT_EQ(xfer::toml_nesting("a.b.c = 1\n"), 3u);
  EXPECT_EQ(xfer::toml_nesting("x = [[1, 2], [3]]\n"), 3u);
  EXPECT_EQ(xfer::toml_nesting("t = { a.b = { c = 1 } }\n"), 4u);
  // Dots in values, strings and comments are not tables.
  EXPECT_EQ(xfer::toml_nesting("x = 1.5\ny = \"a.b.c.d\"\n# a.b.c.d.e\nz = [1.5, 2.5, 3.5]\n"), 2u);
  EXPECT_EQ(xfer::toml_nesting("\"a.b.c\" = 1\n'd.e.f' = 2\n"), 1u);
  EXPECT_EQ(xfer::toml_nesting("s = \"\"\"\nmulti [[[ line\n\"\"\"\n"), 1u);
  std::string deep = "[daemon]\n";
  for (int i = 0; i < 1000; ++i) deep += "a.";
  deep += "b = 1\n";
  EXPECT_EQ(xfer::toml_nesting(deep), 1002u);
  EXPECT_THROW(xfer::check_toml_nesting(deep, "x.conf"), xfer::NestingError);
  std::string header = "[";
  for (int i = 0; i < 100; ++i) header += "a.";
  EXPECT_THROW(xfer::check_toml_nesting(header + "b]\nc = 1\n", "x.conf"), xfer::NestingError);
  EXPECT_NO_THROW(xfer::check_toml_nesting("[policy.x]\nalgorithm = \"min-energy\"\nmax_cc = 16\n", "x.conf"));
}
