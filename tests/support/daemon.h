// xferd for the integration tests: a private dbus-daemon with a policy like
// Debian's system bus (scripts/private-bus.sh, as the README's main job uses),
// and the real xferd on it, with a notify socket to see READY, STATUS and
// WATCHDOG as systemd would.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace xtest {

class StopIfTestDies;  // fixture.h

class PrivateBus {
 public:
  PrivateBus();  // also sets DBUS_SYSTEM_BUS_ADDRESS for this process and its children
  ~PrivateBus();
  std::string address;

 private:
  std::string dir_;
  std::unique_ptr<StopIfTestDies> reaper_;
};

class Xferd {
 public:
  // config: the text of xferd.conf (kernel layer and state go to the test's own directory).
  explicit Xferd(const std::string& config);
  ~Xferd();
  // Starts xferd and waits for READY=1 (fails the test with its log if it does not come).
  void start();
  void stop();    // SIGTERM, wait
  void kill9();   // SIGKILL, wait
  bool running() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }
  // Resident memory of the running xferd (VmRSS, or VmHWM: its peak), in bytes.
  uint64_t rss_bytes(const char* field = "VmRSS:") const;
  // CPU time (user + system) the running xferd has used, in seconds.
  double cpu_seconds() const;
  // Notifications received so far ("READY=1", "STATUS=...", "WATCHDOG=1").
  std::vector<std::string> notifications(int wait_ms = 0);
  std::string log() const;
  // xferd logs to the journal (as under systemd) instead of its log file:
  // for a test that runs its own journald.
  static bool to_journal;
  std::string dir, state_dir, config_file, config_dir, log_file;

 private:
  void start_reader();
  int notify_fd_ = -1;
  std::string notify_path_;
  pid_t pid_ = -1;
  // A reader drains the socket all the time, as systemd does: a full datagram
  // queue would block xferd in sd_notify.
  std::thread reader_;
  std::atomic<bool> stop_reader_{false};
  mutable std::mutex mu_;
  std::vector<std::string> notes_;
  size_t start_mark_ = 0;  // notes_ before the latest start()
};

// A command line run as uid/gid 65534 (nobody), no supplementary groups.
std::string as_nobody(const std::string& cmd);
// busctl against xferd: "call ... Manager1 METHOD ARGS", "get-property ...". Output and status.
struct Shell {
  int status = 0;
  std::string out;
};
Shell run(const std::string& cmd);  // stdout and stderr together
// A job's property by busctl (the value only, e.g. "done" or "12345").
std::string job_property(const std::string& path, const std::string& prop);

}  // namespace xtest
