// Terminal output of xferctl: a one-line progress bar on stderr and the
// result table at the end.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "xfer/engine.h"

namespace xferctl {

std::string human_bytes(double bytes);
// Redraws the bar in place (\r); call finish_bar() before printing anything else.
void draw_bar(const xfer::JobProgress& p, const std::string& params);
// The bar's short params, "s:cc/p/pp m:... ", from chunks given as {kind, cc, p, pp}
// (a job summary's "chunks", or the Job1 Params property read as JSON).
std::string brief_params(const nlohmann::json& chunks);
void finish_bar();
// title: what produced it ("xferctl run", "job 3").
void print_result(const nlohmann::json& summary, const std::string& title = "xferctl run");

}  // namespace xferctl
