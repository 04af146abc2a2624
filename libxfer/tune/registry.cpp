// Every SLA policy name and the algorithm behind it (DESIGN.md "Tuners").
#include <stdexcept>

#include "energy_efficient.h"
#include "hla_tuner.h"
#include "max_throughput.h"
#include "min_energy.h"
#include "static_tuner.h"
#include "throughput_target.h"
#include "xfer/tuner.h"

namespace xfer {

const std::vector<TunerEntry>& tuner_registry() {
  static const std::vector<TunerEntry> entries = {
      {"static", "fixed cc / p / pp (and cores, frequency) given by the caller",
       [](const TunerOptions& o) -> std::unique_ptr<Tuner> {
         return std::make_unique<StaticTuner>(o.fixed.value_or(ChunkParams{}), o.fixed_cores, o.fixed_freq_khz);
       }},
      {"min-energy", "MinE: per-chunk pp, p, cc from BDP, file size and TCP buffer; kernel stepped down (energy-aware Alg. 1)",
       [](const TunerOptions& o) -> std::unique_ptr<Tuner> { return std::make_unique<MinEnergyTuner>(o); }},
      {"max-throughput", "MaxThr: channels round-robin Large, Medium, Small; all cores (http-sla Alg. 2)",
       [](const TunerOptions& o) -> std::unique_ptr<Tuner> { return std::make_unique<MaxThroughputTuner>(o); }},
      {"energy-efficient", "HTEE / EE: search cc for the best throughput per joule (energy-aware Alg. 2, http-sla Alg. 3)",
       [](const TunerOptions& o) -> std::unique_ptr<Tuner> { return std::make_unique<EnergyEfficientTuner>(o); }},
      {"throughput-target", "SLAEE / FlexibleThr: reach a throughput target at least energy (energy-aware Alg. 3, http-sla Alg. 4)",
       [](const TunerOptions& o) -> std::unique_ptr<Tuner> { return std::make_unique<ThroughputTargetTuner>(o); }},
      {"hla-energy",
       "Cross-LayerHLA Alg. 1: most throughput within an energy ceiling (or least energy), from the parameter table; "
       "switches load surfaces as the external load moves",
       [](const TunerOptions& o) -> std::unique_ptr<Tuner> {
         return std::make_unique<HlaTuner>(HlaTuner::Goal::Energy, o);
       }},
      {"hla-throughput",
       "Cross-LayerHLA Alg. 2: least energy above a throughput floor (or most throughput), from the parameter table; "
       "switches load surfaces as the external load moves",
       [](const TunerOptions& o) -> std::unique_ptr<Tuner> {
         return std::make_unique<HlaTuner>(HlaTuner::Goal::Throughput, o);
       }},
      {"sweep", "not an SLA: static params on a schedule (--sweep cc:p:pp[:cores],..., --sweep-hold N): fills a history",
       [](const TunerOptions& o) -> std::unique_ptr<Tuner> {
         return std::make_unique<SweepTuner>(o.sweep_points, o.sweep_hold);
       }},
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
