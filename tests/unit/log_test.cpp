// The journal fields of a log line (xfer/log.h): the job in scope, the
// front end's fields for it, an event's MESSAGE_ID, every value escaped.
#include "xfer/log.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

namespace xlog = xfer::log;

namespace {
std::map<std::string, std::string> as_map(const xlog::Fields& f) {
  std::map<std::string, std::string> m;
  for (const auto& [k, v] : f) {
    EXPECT_EQ(m.count(k), 0u) << "field " << k << " twice";
    m[k] = v;
  }
  return m;
}
}  // namespace

TEST(LogFields, AJobScopeNestsAndTheFrontEndsFieldsAreEscaped) {
  EXPECT_TRUE(xlog::current_fields().empty()) << "no job, no event: no fields";
  xlog::set_job_fields([](uint64_t job, xlog::Fields& out) {
    out.emplace_back("XFERD_POLICY", "p" + std::to_string(job));
    out.emplace_back("XFERD_LABEL", "a\nMESSAGE_ID=forged\x1b[31m");
  });
  {
    xlog::JobScope outer(3);
    auto f = as_map(xlog::current_fields());
    EXPECT_EQ(f["XFERD_JOB"], "3");
    EXPECT_EQ(f["XFERD_POLICY"], "p3");
    EXPECT_EQ(f["XFERD_LABEL"].find('\n'), std::string::npos) << f["XFERD_LABEL"];
    EXPECT_EQ(f["XFERD_LABEL"].find('\x1b'), std::string::npos) << f["XFERD_LABEL"];
    EXPECT_EQ(f.count("MESSAGE_ID"), 0u);
    {
      xlog::JobScope inner(7);
      EXPECT_EQ(xlog::current_job(), 7u);
      EXPECT_EQ(as_map(xlog::current_fields())["XFERD_JOB"], "7");
    }
    EXPECT_EQ(xlog::current_job(), 3u);
    {
      xlog::JobScope none(0);  // a line about no job inside a job's callback
      EXPECT_TRUE(xlog::current_fields().empty());
    }
  }
  EXPECT_EQ(xlog::current_job(), 0u);
  xlog::set_job_fields(nullptr);
}

TEST(LogFields, AnEventCarriesItsMessageIdForItsOwnLineOnly) {
  std::string seen;
  {
    xlog::MessageScope s(xlog::msg::kJobDone);
    auto f = as_map(xlog::current_fields());
    seen = f["MESSAGE_ID"];
  }
  EXPECT_EQ(seen, xlog::msg::kJobDone);
  EXPECT_TRUE(xlog::current_fields().empty());
  // Every id is 128 bits in hex, as systemd's catalog wants, and unique.
  std::set<std::string> ids;
  for (const char* id : {xlog::msg::kJobDone, xlog::msg::kJobFailed, xlog::msg::kSlaMissed, xlog::msg::kSlaMetAgain,
                         xlog::msg::kKernelChanged, xlog::msg::kArbiterCap, xlog::msg::kHistoryStalled}) {
    EXPECT_EQ(std::string(id).size(), 32u) << id;
    EXPECT_EQ(std::string(id).find_first_not_of("0123456789abcdef"), std::string::npos) << id;
    ids.insert(id);
  }
  EXPECT_EQ(ids.size(), 7u);
}
