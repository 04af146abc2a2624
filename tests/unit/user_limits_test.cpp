// daemon/user_limits: what one user's unfinished jobs may hold, and the
// refusal (its D-Bus error name, its figures, the limit's name) when more
// would not fit. The same refusals through D-Bus: Trust.* and ManyJobs.*.
#include "user_limits.h"

#include <gtest/gtest.h>

using xferd::Refusal;
using xferd::UserHoldings;
using xferd::UserLimits;

namespace {

xferd::Config limits() {
  xferd::Config c;
  c.max_jobs_per_user = 3;
  c.max_entries_per_job = 100;
  c.max_entries_per_user = 250;
  c.max_secret_kib_per_user = 8;
  c.max_floor_mbps_per_user = 150;
  return c;
}

// The refusal's name and text, or "" when none was thrown.
std::pair<std::string, std::string> refusal(const std::function<void()>& f) {
  try {
    f();
  } catch (const Refusal& r) {
    return {r.name, r.what()};
  }
  return {"", ""};
}

}  // namespace

TEST(UserLimits, JobsAndEntriesPerUser) {
  xferd::Config c = limits();
  UserLimits l(c);
  UserHoldings h{2, 200, 0, 0};
  EXPECT_EQ(refusal([&] { l.check_jobs("alice", h, 50); }).first, "");
  auto [name, why] = refusal([&] { l.check_jobs("alice", h, 51); });
  EXPECT_EQ(name, xferd::err::kTooManyEntries);
  EXPECT_EQ(why, "alice has 200 files in unfinished jobs; 51 more would pass the limit of 250 per user "
                 "(limits.max_entries_per_user); wait for a job to finish");
  h.jobs = 3;
  std::tie(name, why) = refusal([&] { l.check_jobs("alice", h, 0); });
  EXPECT_EQ(name, xferd::err::kTooManyJobs);
  EXPECT_NE(why.find("alice has 3 unfinished jobs"), std::string::npos) << why;
  EXPECT_NE(why.find("limits.max_jobs_per_user"), std::string::npos) << why;
}

TEST(UserLimits, ASubmitMayCarryWhatIsLeftOfTheUsersEntries) {
  xferd::Config c = limits();
  UserLimits l(c);
  xferd::EntryLimit none = l.entries_left("bob", UserHoldings{});
  EXPECT_EQ(none.most, 100u) << "the per-job limit, when the user has room for it";
  xferd::EntryLimit some = l.entries_left("bob", UserHoldings{1, 180, 0, 0});
  EXPECT_EQ(some.most, 70u);
  EXPECT_STREQ(some.code, xferd::err::kTooManyEntries);
  EXPECT_NE(some.why.find("over 70 more would pass the limit of 250"), std::string::npos) << some.why;
  EXPECT_EQ(l.entries_left("bob", UserHoldings{1, 250, 0, 0}).most, 0u) << "at the limit: its first entry is refused";
  EXPECT_EQ(refusal([&] { l.entries_left("bob", UserHoldings{1, 300, 0, 0}); }).first, xferd::err::kTooManyEntries)
      << "over the limit already (it was lowered)";
  EXPECT_EQ(refusal([&] { l.entries_left("bob", UserHoldings{3, 0, 0, 0}); }).first, xferd::err::kTooManyJobs)
      << "refused before its manifest is read";
}

TEST(UserLimits, SecretsAndFloorsPerUser) {
  xferd::Config c = limits();
  UserLimits l(c);
  EXPECT_EQ(refusal([&] { l.check_secrets("carol", UserHoldings{1, 0, 4096, 0}, 4096); }).first, "");
  auto [name, why] = refusal([&] { l.check_secrets("carol", UserHoldings{1, 0, 4096, 0}, 4097); });
  EXPECT_EQ(name, xferd::err::kSecretsTooLarge);
  EXPECT_EQ(why, "credentials: 5 KiB of secrets with the 4 KiB carol's unfinished jobs hold would pass the limit of "
                 "8 KiB per user (limits.max_secret_kib_per_user); nothing fetched");
  EXPECT_EQ(refusal([&] { l.check_floors("carol", UserHoldings{1, 0, 0, 80e6}, 70e6); }).first, "");
  std::tie(name, why) = refusal([&] { l.check_floors("carol", UserHoldings{1, 0, 0, 80e6}, 80e6); });
  EXPECT_EQ(name, xferd::err::kFloorDoesNotFit);
  EXPECT_NE(why.find("a floor of 80 Mbit/s beside the 80 Mbit/s of floors carol's unfinished jobs hold"),
            std::string::npos)
      << why;
  c.max_floor_mbps_per_user = 0;  // no limit
  EXPECT_EQ(refusal([&] { l.check_floors("carol", UserHoldings{1, 0, 0, 80e6}, 1e9); }).first, "");
}
