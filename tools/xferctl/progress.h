// Terminal output of xferctl: a one-line progress bar on stderr and the
// result table at the end.
#pragma once

#include <nlohmann/json.hpp>
#include <deque>
#include <string>
#include <utility>
#include <vector>

#include "xfer/engine.h"

namespace xferctl {

std::string human_bytes(double bytes);

// One chunk's application-layer params, as the bar shows them.
struct ChunkKnobs {
  std::string kind;
  int cc = 1, p = 1, pp = 1;
};
// "cc 32, p 1, pp 1" for one chunk; "small cc 2, p 1, pp 1; large cc 8, ..." for several.
std::string params_in_words(const std::vector<ChunkKnobs>& chunks);
// From chunks given as [{kind, cc, p, pp}] (the Job1 Params property read as JSON).
std::vector<ChunkKnobs> knobs_from_json(const nlohmann::json& chunks);

// The one-line progress bar on stderr, redrawn in place: share done, bytes,
// the rate over the last two seconds (as curl and aria2c show it), an ETA,
// files and the params in words. Call draw() every few hundred ms and
// finish() before printing anything else.
class ProgressBar {
 public:
  void draw(const xfer::JobProgress& p, const std::string& params);
  void finish();

 private:
  std::deque<std::pair<double, uint64_t>> window_;  // (seconds, bytes done)
};

// title: what produced it ("xferctl run", "job 3").
void print_result(const nlohmann::json& summary, const std::string& title = "xferctl run");

}  // namespace xferctl
