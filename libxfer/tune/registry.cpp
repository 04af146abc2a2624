// Every SLA policy name and the algorithm behind it (DESIGN.md "Tuners").
#include <algorithm>
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
       },
       {"cc", "p", "pp", "cores", "freq_khz", "search_levels"}, {}, "fixes the params",
       "takes fixed params per job"},
      {"min-energy", "MinE: per-chunk pp, p, cc from BDP, file size and TCP buffer; kernel stepped down (energy-aware Alg. 1)",
       [](const TunerOptions& o) -> std::unique_ptr<Tuner> { return std::make_unique<MinEnergyTuner>(o); }},
      {"max-throughput", "MaxThr: channels round-robin Large, Medium, Small; all cores (http-sla Alg. 2)",
       [](const TunerOptions& o) -> std::unique_ptr<Tuner> { return std::make_unique<MaxThroughputTuner>(o); },
       {"stream_cost"}},
      {"energy-efficient", "HTEE / EE: search cc for the best throughput per joule (energy-aware Alg. 2, http-sla Alg. 3)",
       [](const TunerOptions& o) -> std::unique_ptr<Tuner> { return std::make_unique<EnergyEfficientTuner>(o); },
       {"search_step", "search_levels"}},
      {"throughput-target", "SLAEE / FlexibleThr: reach a throughput target at least energy (energy-aware Alg. 3, http-sla Alg. 4)",
       [](const TunerOptions& o) -> std::unique_ptr<Tuner> { return std::make_unique<ThroughputTargetTuner>(o); },
       {"target_mbps", "target_pct"}, {{"target_mbps", "target_pct"}}},
      {"hla-energy",
       "Cross-LayerHLA Alg. 1: most throughput within an energy ceiling (or least energy), from the parameter table; "
       "switches load surfaces as the external load moves",
       [](const TunerOptions& o) -> std::unique_ptr<Tuner> {
         return std::make_unique<HlaTuner>(HlaTuner::Goal::Energy, o);
       },
       {"energy_budget_j_per_gb", "explore_share"}},
      {"hla-throughput",
       "Cross-LayerHLA Alg. 2: least energy above a throughput floor (or most throughput), from the parameter table; "
       "switches load surfaces as the external load moves",
       [](const TunerOptions& o) -> std::unique_ptr<Tuner> {
         return std::make_unique<HlaTuner>(HlaTuner::Goal::Throughput, o);
       },
       {"target_mbps", "target_pct", "explore_share"}},
      {"sweep", "not an SLA: static params on a schedule (--sweep cc:p:pp[:cores],..., --sweep-hold N): fills a history",
       [](const TunerOptions& o) -> std::unique_ptr<Tuner> {
         return std::make_unique<SweepTuner>(o.sweep_points, o.sweep_hold);
       },
       {"sweep", "sweep_hold"}, {{"sweep"}}, "", "fills a history from xferctl run (xfer-hla collect)"},
  };
  return entries;
}

const TunerEntry* find_tuner(const std::string& name) {
  for (const TunerEntry& e : tuner_registry())
    if (e.name == name) return &e;
  return nullptr;
}

std::string tuner_needs_problem(const std::string& algorithm, const nlohmann::json& given) {
  const TunerEntry* self = find_tuner(algorithm);
  if (!self) return "";
  for (const std::vector<std::string>& group : self->needs) {
    bool any = false;
    for (const std::string& k : group) any |= given.contains(k);
    if (!any) {
      std::string alts;
      for (size_t i = 0; i < group.size(); ++i) alts += (i == 0 ? "" : " or ") + group[i];
      return "needs " + alts;
    }
  }
  return "";
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
