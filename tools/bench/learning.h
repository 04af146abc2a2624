// A learning-curve scenario (issue 41, scenario.h LearningSpec): rounds of
// everyday jobs on a new path into an empty history, the parameter table
// analysed again after each round, and how far the hla tuners' start is
// from the best static setting as the rounds go.
#pragma once

#include <csignal>
#include <functional>
#include <string>
#include <vector>

#include "measure.h"
#include "scenario.h"
#include "testbed.h"

namespace bench {

struct LearningRun {
  const Scenario& sc;
  const std::vector<PreparedDataset>& datasets;
  const std::vector<ClientSpec>& clients;
  std::string out;
  int repeat = 1;  // curves, each from an empty history
  volatile std::sig_atomic_t* stop = nullptr;
  std::string analyze_bin;  // xfer-hla
  // Runs one client (its "{history}" and "{hla_table}" already filled in).
  std::function<RunRow(const ClientSpec&, size_t, const PreparedDataset&, int curve, int round)> run;

  // What each analysis after a round made of the history so far.
  struct Analysis {
    int curve = 0, round = 0, exit_code = 0;
    size_t strata = 0, by_surfaces = 0, by_measured = 0, rows = 0;
    double seconds = 0;
  };
  std::vector<Analysis> analyses;
};

// The client runs the scenario makes (for the progress count).
int learning_runs(const LearningRun& lr);
// Every curve: OUT/learning/curve-N/{history.db,table.json,analyze-K.*}.
void run_learning(LearningRun& lr);
// The report: per round the first interval's distance to the best static
// setting's sustained rate, the job against the best peer, the floor and
// the energy goals at the last round (medians over the curves), and what
// each analysis made. Also writes OUT/learning.csv and OUT/learning-curve.svg.
std::string learning_markdown(const LearningRun& lr, const std::vector<RunRow>& rows);

}  // namespace bench
