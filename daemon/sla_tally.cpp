#include "sla_tally.h"

#include <fmt/format.h>

#include "xfer/running_job.h"

namespace xferd {

std::string SlaTally::promise() const {
  if (floor_bps > 0) return fmt::format("floor {:g} Mbit/s", floor_bps / 1e6);
  if (ceiling_j_per_gb > 0) return fmt::format("ceiling {:g} J/GB", ceiling_j_per_gb);
  return "";
}

std::optional<bool> SlaTally::judge(const xfer::Observation& o, Turn* turn) {
  if (turn) *turn = Turn::Same;
  std::optional<bool> kept = xfer::interval_keeps_promise(o, floor_bps, ceiling_j_per_gb);
  if (!kept) return kept;
  ++(*kept ? met : missed);
  if (turn && !*kept && last != false) *turn = Turn::FirstMiss;
  if (turn && *kept && last == false) *turn = Turn::MetAgain;
  last = kept;
  return kept;
}

nlohmann::json SlaTally::to_json() const {
  nlohmann::json s = {{"promise", promise()}, {"intervals_met", met}, {"intervals_missed", missed}};
  if (floor_bps > 0) s["floor_mbps"] = floor_bps / 1e6;
  if (ceiling_j_per_gb > 0) s["ceiling_j_per_gb"] = ceiling_j_per_gb;
  return s;
}

}  // namespace xferd
