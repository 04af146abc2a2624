// libxfer/engine/validator.cpp: which header names a version of a source.
#include "xfer/validator.h"

#include <gtest/gtest.h>

TEST(Validator, AStrongTagElseLastModifiedElseNone) {
  EXPECT_EQ(xfer::response_validator("\"5f1e-1a\"", "Tue, 01 Dec 2026 10:00:00 GMT"), "etag \"5f1e-1a\"");
  // A weak tag vouches for equivalence, not bytes: Last-Modified serves.
  EXPECT_EQ(xfer::response_validator("W/\"5f1e\"", "Tue, 01 Dec 2026 10:00:00 GMT"),
            "last-modified Tue, 01 Dec 2026 10:00:00 GMT");
  EXPECT_EQ(xfer::response_validator("W/\"5f1e\"", ""), "");
  EXPECT_EQ(xfer::response_validator("", ""), "");
  EXPECT_EQ(xfer::response_validator("unquoted", ""), "");
  // A value a record could not hold on one line, or far too long, is none.
  EXPECT_EQ(xfer::response_validator("\"a\nb\"", ""), "");
  EXPECT_EQ(xfer::response_validator("\"" + std::string(600, 'x') + "\"", ""), "");
  EXPECT_EQ(xfer::if_range_value("etag \"5f1e-1a\""), "\"5f1e-1a\"");
  EXPECT_EQ(xfer::if_range_value("last-modified Tue, 01 Dec 2026 10:00:00 GMT"), "Tue, 01 Dec 2026 10:00:00 GMT");
  EXPECT_EQ(xfer::if_range_value("something else"), "");
}
