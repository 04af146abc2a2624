#include "user_limits.h"

#include <fmt/format.h>

namespace xferd {

namespace {

std::string entries_refusal(const std::string& user, size_t held, const std::string& more, int limit) {
  return fmt::format("{} has {} files in unfinished jobs; {} more would pass the limit of {} per user "
                     "(limits.max_entries_per_user); wait for a job to finish",
                     user, held, more, limit);
}

}  // namespace

void UserLimits::check_jobs(const std::string& user, const UserHoldings& h, size_t new_entries) const {
  if (h.jobs >= size_t(cfg_.max_jobs_per_user))
    throw Refusal(err::kTooManyJobs, fmt::format("{} has {} unfinished jobs, the most this daemon takes per user "
                                                 "(limits.max_jobs_per_user); wait for one to finish",
                                                 user, h.jobs));
  if (h.entries + new_entries > size_t(cfg_.max_entries_per_user))
    throw Refusal(err::kTooManyEntries,
                  entries_refusal(user, h.entries, std::to_string(new_entries), cfg_.max_entries_per_user));
}

EntryLimit UserLimits::entries_left(const std::string& user, const UserHoldings& h) const {
  check_jobs(user, h, 0);  // a user with too many jobs is refused before its manifest is read
  const size_t per_user = size_t(cfg_.max_entries_per_user);
  const size_t room = h.entries >= per_user ? 0 : per_user - h.entries;
  if (room >= size_t(cfg_.max_entries_per_job)) return EntryLimit(size_t(cfg_.max_entries_per_job));
  return EntryLimit(room, err::kTooManyEntries,
                    entries_refusal(user, h.entries, "over " + std::to_string(room), cfg_.max_entries_per_user));
}

void UserLimits::check_secrets(const std::string& user, const UserHoldings& h, size_t new_bytes) const {
  const size_t limit = size_t(cfg_.max_secret_kib_per_user) << 10;
  if (h.secret_bytes + new_bytes > limit)
    throw Refusal(err::kSecretsTooLarge,
                  fmt::format("credentials: {} KiB of secrets with the {} KiB {}'s unfinished jobs hold would pass the "
                              "limit of {} KiB per user (limits.max_secret_kib_per_user); nothing fetched",
                              (new_bytes + 1023) >> 10, (h.secret_bytes + 1023) >> 10, user,
                              cfg_.max_secret_kib_per_user));
}

void UserLimits::check_floors(const std::string& user, const UserHoldings& h, double floor_bps) const {
  if (floor_bps <= 0 || cfg_.max_floor_mbps_per_user <= 0) return;
  if ((h.floors_bps + floor_bps) / 1e6 > cfg_.max_floor_mbps_per_user + 1e-9)
    throw Refusal(err::kFloorDoesNotFit,
                  fmt::format("a floor of {:g} Mbit/s beside the {:g} Mbit/s of floors {}'s unfinished jobs hold "
                              "would pass the limit of {:g} Mbit/s per user (limits.max_floor_mbps_per_user); "
                              "nothing fetched",
                              floor_bps / 1e6, h.floors_bps / 1e6, user, cfg_.max_floor_mbps_per_user));
}

}  // namespace xferd
