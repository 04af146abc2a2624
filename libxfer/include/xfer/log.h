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
// The daemon: to the journal when it runs under systemd (JOURNAL_STREAM or
// INVOCATION_ID set), else stderr. Returns "journal" or "stderr".
std::string to_journal_or_stderr(const std::string& identifier);

}  // namespace xfer::log
