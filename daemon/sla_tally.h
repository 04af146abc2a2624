// A job's promise, a throughput floor or an energy ceiling, and how its
// intervals kept it: what Job1's Sla* properties, its report's "sla" and
// the xferd_sla_* metrics show, and when the operator is told (the first
// miss, and when it holds again: not at every interval).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "xfer/tuner.h"

namespace xferd {

struct SlaTally {
  double floor_bps = 0;         // its throughput floor (target_mbps); 0: none
  double ceiling_j_per_gb = 0;  // its energy ceiling (energy_budget_j_per_gb); 0: none
  uint32_t met = 0, missed = 0;
  std::optional<bool> last;  // the last verdict (none yet: nullopt)

  // "floor 100 Mbit/s", "ceiling 50 J/GB" or "".
  std::string promise() const;
  // What a verdict changed for the operator.
  enum class Turn { Same, FirstMiss, MetAgain };
  // One interval judged (xfer::interval_keeps_promise) and tallied; nullopt
  // when it says nothing of the promise (settling, ending, no figure).
  std::optional<bool> judge(const xfer::Observation& o, Turn* turn = nullptr);
  // {"promise", "intervals_met", "intervals_missed", and the floor or ceiling}.
  nlohmann::json to_json() const;
};

}  // namespace xferd
