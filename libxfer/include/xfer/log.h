// One logger for the whole project (spdlog). The daemon points it at the
// journal; tools leave it on stderr.
//
// In the journal every line that concerns a job carries structured fields,
// so that `journalctl XFERD_JOB=3` finds the job's lines whoever logged them
// (the daemon, the engine, the control loop, a tuner):
//
//   log::JobScope scope(id);   // this thread's lines concern job id, until
//                              // the scope ends (scopes nest)
//   XFERD_JOB=id               always; the front end adds its own fields for
//                              the job (set_job_fields: the daemon's
//                              XFERD_POLICY, XFERD_UID, XFERD_LABEL)
//   log::event(msg::kJobDone, level, "...", args)   a line operators alert
//                              on: MESSAGE_ID= one of msg:: (explained in
//                              systemd/xferd.catalog)
//
// Every value, fields included, is escaped as the message is (text.h
// printable): caller text never forges a line or a field.
#pragma once

#include <spdlog/spdlog.h>

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

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

// The job this thread's log lines concern while the scope lives (0: none).
class JobScope {
 public:
  explicit JobScope(uint64_t job);
  ~JobScope();
  JobScope(const JobScope&) = delete;
  JobScope& operator=(const JobScope&) = delete;

 private:
  uint64_t outer_;
};
uint64_t current_job();  // 0: none

// Journal fields (NAME, value) the front end adds for a job: called for
// each line logged in a JobScope. Names are upper case ASCII.
using Fields = std::vector<std::pair<std::string, std::string>>;
void set_job_fields(std::function<void(uint64_t job, Fields& out)> f);
// The fields a line logged now carries (XFERD_JOB, the front end's, and a
// MESSAGE_ID inside event()), values escaped: what the journal sink sends.
Fields current_fields();

// The message ids of the events operators alert on (128-bit, as systemd's
// catalog wants them). systemd/xferd.catalog explains each.
namespace msg {
inline constexpr const char* kJobDone = "b089445c36154103b739d517902fb9b9";
inline constexpr const char* kJobFailed = "412e92c9087e4b63949f05c50e28d18f";
inline constexpr const char* kSlaMissed = "2885df09413c4218bd81d4c7f3e208ac";
inline constexpr const char* kKernelChanged = "f809ec4821a548f4a1303fd016f99270";
inline constexpr const char* kArbiterCap = "90972b5f879746c5a4578e8c922840c5";
inline constexpr const char* kHistoryStalled = "396b1f7caac249398a0b10d5ef3412cf";
inline constexpr const char* kSlaMetAgain = "7b0f10a2163a43ecaa2bc2d0310f269a";
}  // namespace msg

// The message id of the line being logged (inside event()), else null.
class MessageScope {
 public:
  explicit MessageScope(const char* id);
  ~MessageScope();
  MessageScope(const MessageScope&) = delete;
  MessageScope& operator=(const MessageScope&) = delete;

 private:
  const char* outer_;
};

template <class... A>
void event(const char* message_id, spdlog::level::level_enum level, spdlog::format_string_t<A...> f, A&&... a) {
  MessageScope scope(message_id);
  spdlog::log(level, f, std::forward<A>(a)...);
}

}  // namespace xfer::log
