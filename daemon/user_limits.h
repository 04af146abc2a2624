// The [limits] one user's unfinished jobs are held to: how many jobs, how
// many entries, how many bytes of secrets and how much of throughput floors.
// The service counts what a user holds (UserHoldings); these say whether
// more fits, and refuse with the figures and the limit's name when not.
#pragma once

#include <cstddef>
#include <string>

#include "config.h"
#include "errors.h"
#include "submit_args.h"

namespace xferd {

// What one user's unfinished jobs hold now.
struct UserHoldings {
  size_t jobs = 0;
  size_t entries = 0;
  size_t secret_bytes = 0;
  double floors_bps = 0;
};

class UserLimits {
 public:
  explicit UserLimits(const Config& cfg) : cfg_(cfg) {}
  // Refusal (TooManyJobs, TooManyEntries) when another job of new_entries
  // would pass limits.max_jobs_per_user or limits.max_entries_per_user.
  void check_jobs(const std::string& user, const UserHoldings& h, size_t new_entries) const;
  // The entries a Submit may carry, read before its manifest: what is left
  // of the per-user limit when less than the per-job one. Refuses a user
  // who has as many jobs as it may.
  EntryLimit entries_left(const std::string& user, const UserHoldings& h) const;
  // Refusal (SecretsTooLarge) when new_bytes more of secrets would pass
  // limits.max_secret_kib_per_user (h: without the job they would replace).
  void check_secrets(const std::string& user, const UserHoldings& h, size_t new_bytes) const;
  // Refusal (FloorDoesNotFit) when a floor would take the user's floors past
  // limits.max_floor_mbps_per_user (0: no limit).
  void check_floors(const std::string& user, const UserHoldings& h, double floor_bps) const;

 private:
  const Config& cfg_;
};

}  // namespace xferd
