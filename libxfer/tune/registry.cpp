// Every SLA policy name and the algorithm behind it (DESIGN.md "Tuners").
#include <stdexcept>

#include "min_energy.h"
#include "static_tuner.h"
#include "xfer/tuner.h"

namespace xfer {

const std::vector<TunerEntry>& tuner_registry() {
  static const std::vector<TunerEntry> entries = {
      {"static", "fixed cc / p / pp given by the caller",
       [](const TunerOptions& o) -> std::unique_ptr<Tuner> {
         return std::make_unique<StaticTuner>(o.fixed.value_or(ChunkParams{}));
       }},
      {"min-energy", "MinE: per-chunk pp, p, cc from BDP, file size and TCP buffer (energy-aware Alg. 1)",
       [](const TunerOptions&) -> std::unique_ptr<Tuner> { return std::make_unique<MinEnergyTuner>(); }},
  };
  return entries;
}

std::unique_ptr<Tuner> make_tuner(const std::string& name, const TunerOptions& opts) {
  std::string known;
  for (const TunerEntry& e : tuner_registry()) {
    if (e.name == name) return e.make(opts);
    known += (known.empty() ? "" : ", ") + e.name;
  }
  throw std::invalid_argument("unknown policy '" + name + "' (known: " + known + ")");
}

}  // namespace xfer
