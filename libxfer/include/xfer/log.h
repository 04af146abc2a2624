// One logger for the whole project (spdlog). The daemon points it at the
// journal; tools leave it on stderr.
#pragma once

#include <spdlog/spdlog.h>

namespace xfer::log {

using spdlog::debug;
using spdlog::error;
using spdlog::info;
using spdlog::warn;

// "debug" | "info" | "warn" | "error" | "off"
void set_level(const std::string& level);
// Command-line tools: log lines go to stderr, never mixed into stdout.
void to_stderr();

}  // namespace xfer::log
