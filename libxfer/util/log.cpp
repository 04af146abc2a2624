#include "xfer/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>

namespace xfer::log {

void set_level(const std::string& level) {
  spdlog::set_level(spdlog::level::from_str(level));
}

void to_stderr() {
  auto logger = spdlog::stderr_color_mt("xfer");
  spdlog::set_default_logger(logger);
}

}  // namespace xfer::log
