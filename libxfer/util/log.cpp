#include "xfer/log.h"

#include <spdlog/sinks/sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <sys/uio.h>
#include <systemd/sd-journal.h>

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

thread_local uint64_t t_job = 0;
thread_local const char* t_message_id = nullptr;
std::function<void(uint64_t, Fields&)>& job_fields() {
  static std::function<void(uint64_t, Fields&)> f;
  return f;
}

int syslog_priority(spdlog::level::level_enum l) {
  switch (l) {
    case spdlog::level::critical: return 2;
    case spdlog::level::err: return 3;
    case spdlog::level::warn: return 4;
    case spdlog::level::info: return 6;
    default: return 7;
  }
}

// The journal's native protocol (sd_journal_sendv): the message, its
// priority and identifier, and the fields of the job and event it concerns.
class JournalSink : public spdlog::sinks::sink {
 public:
  explicit JournalSink(std::string identifier) : identifier_("SYSLOG_IDENTIFIER=" + std::move(identifier)) {}
  void log(const spdlog::details::log_msg& msg) override {
    std::vector<std::string> lines;
    lines.push_back("MESSAGE=" + std::string(msg.payload.data(), msg.payload.size()));
    lines.push_back("PRIORITY=" + std::to_string(syslog_priority(msg.level)));
    lines.push_back(identifier_);
    for (auto& [name, value] : current_fields()) lines.push_back(name + "=" + value);
    std::vector<iovec> iov;
    iov.reserve(lines.size());
    for (std::string& l : lines) iov.push_back({l.data(), l.size()});
    sd_journal_sendv(iov.data(), int(iov.size()));
  }
  void flush() override {}
  void set_pattern(const std::string&) override {}
  void set_formatter(std::unique_ptr<spdlog::formatter>) override {}

 private:
  std::string identifier_;
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
  use(identifier, std::make_shared<JournalSink>(identifier));
  return "journal";
}

JobScope::JobScope(uint64_t job) : outer_(t_job) { t_job = job; }
JobScope::~JobScope() { t_job = outer_; }
uint64_t current_job() { return t_job; }

MessageScope::MessageScope(const char* id) : outer_(t_message_id) { t_message_id = id; }
MessageScope::~MessageScope() { t_message_id = outer_; }

void set_job_fields(std::function<void(uint64_t, Fields&)> f) { job_fields() = std::move(f); }

Fields current_fields() {
  Fields out;
  if (t_job) {
    out.emplace_back("XFERD_JOB", std::to_string(t_job));
    if (job_fields()) job_fields()(t_job, out);
  }
  if (t_message_id) out.emplace_back("MESSAGE_ID", t_message_id);
  for (auto& [name, value] : out) value = printable(value);
  return out;
}

}  // namespace xfer::log
