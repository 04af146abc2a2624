#include "xfer/log.h"

#include <spdlog/sinks/sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/sinks/systemd_sink.h>

#include <cstdlib>

#include "xfer/text.h"

namespace xfer::log {
namespace {

// Every message passes through printable() on its way to the real sink: log
// lines carry URLs, labels, policy names and paths that callers chose, and
// none of them may forge a line or drive the terminal of whoever reads the
// log. One place, so that no call site can forget.
class EscapingSink : public spdlog::sinks::sink {
 public:
  explicit EscapingSink(spdlog::sink_ptr inner) : inner_(std::move(inner)) {}
  void log(const spdlog::details::log_msg& msg) override {
    std::string_view payload(msg.payload.data(), msg.payload.size());
    std::string safe = printable(payload);
    if (safe.size() == payload.size()) return inner_->log(msg);  // nothing was escaped
    spdlog::details::log_msg copy = msg;
    copy.payload = spdlog::string_view_t(safe.data(), safe.size());
    inner_->log(copy);
  }
  void flush() override { inner_->flush(); }
  void set_pattern(const std::string& p) override { inner_->set_pattern(p); }
  void set_formatter(std::unique_ptr<spdlog::formatter> f) override { inner_->set_formatter(std::move(f)); }

 private:
  spdlog::sink_ptr inner_;
};

void use(const std::string& name, spdlog::sink_ptr inner) {
  spdlog::drop(name);
  auto logger = std::make_shared<spdlog::logger>(name, std::make_shared<EscapingSink>(std::move(inner)));
  spdlog::set_default_logger(logger);
}

}  // namespace

void set_level(const std::string& level) {
  spdlog::set_level(spdlog::level::from_str(level));
}

void to_stderr() { use("xfer", std::make_shared<spdlog::sinks::stderr_color_sink_mt>()); }

std::string to_journal_or_stderr(const std::string& identifier) {
  if (!std::getenv("JOURNAL_STREAM") && !std::getenv("INVOCATION_ID")) {
    to_stderr();
    return "stderr";
  }
  use(identifier, std::make_shared<spdlog::sinks::systemd_sink_mt>(identifier));
  return "journal";
}

}  // namespace xfer::log
