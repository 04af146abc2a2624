#include "xfer/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/sinks/systemd_sink.h>

#include <cstdlib>

namespace xfer::log {

void set_level(const std::string& level) {
  spdlog::set_level(spdlog::level::from_str(level));
}

void to_stderr() {
  auto logger = spdlog::stderr_color_mt("xfer");
  spdlog::set_default_logger(logger);
}

std::string to_journal_or_stderr() {
  if (!std::getenv("JOURNAL_STREAM") && !std::getenv("INVOCATION_ID")) {
    to_stderr();
    return "stderr";
  }
  spdlog::set_default_logger(spdlog::systemd_logger_mt("xferd", "xferd"));
  return "journal";
}

}  // namespace xfer::log
