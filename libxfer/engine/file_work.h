// Work on whole files, off the event loop. A sha256 over a file reads all of
// it: gigabytes take seconds to minutes, and on the loop that would stop
// every transfer and, in the daemon, every D-Bus call (a user could plant a
// sparse terabyte at a final name and hand in its size and a sha256). Such
// work runs here instead: one serial queue with its own thread per owner
// uid, so one user's files never wait behind another user's, and the result
// comes back on the loop. A posted task can be cancelled (from the loop);
// then its done callback never runs, and a hash in progress stops at its
// next block. A task posted as `finishes` (a commit: short, and what it
// holds must be let go) runs even when cancelled; only its done is skipped.
#pragma once

#include <systemd/sd-event.h>
#include <sys/types.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace xfer {

class FileWork {
 public:
  using Stop = std::atomic<bool>;
  using Work = std::function<std::string(const Stop& stop)>;
  // On the loop: the work's result, or the exception it threw.
  using Done = std::function<void(std::string result, std::exception_ptr error)>;
  // Cancels the task when it goes (or on cancel()); move-only.
  class Handle {
   public:
    Handle() = default;
    explicit Handle(std::shared_ptr<Stop> s) : stop_(std::move(s)) {}
    Handle(Handle&&) = default;
    Handle& operator=(Handle&& o) noexcept {
      cancel();
      stop_ = std::move(o.stop_);
      return *this;
    }
    ~Handle() { cancel(); }
    void cancel() {
      if (stop_) *stop_ = true;
      stop_.reset();
    }
    explicit operator bool() const { return stop_ != nullptr; }

   private:
    std::shared_ptr<Stop> stop_;
  };

  explicit FileWork(sd_event* loop);
  ~FileWork();  // stops every task and joins the threads
  FileWork(const FileWork&) = delete;
  FileWork& operator=(const FileWork&) = delete;

  enum class Cancel { Skips, Finishes };
  Handle post(uid_t owner, Work work, Done done, Cancel on_cancel = Cancel::Skips);

 private:
  struct Task {
    std::shared_ptr<Stop> stop;
    Work work;
    Done done;
    std::string result;
    std::exception_ptr error;
    uint64_t log_job = 0;  // the job the poster logged for: done() logs for it too
    Cancel on_cancel = Cancel::Skips;
  };
  // A lane's thread waits a while for more work before it ends: a job of
  // many small files posts a task per file, and a thread each cost more
  // than the work (a blocked wait, no timer while it waits).
  static constexpr int kLingerMs = 2000;
  struct Lane {
    std::deque<Task> queue;
    std::thread thread;
    std::condition_variable more;
    bool busy = false;
  };
  bool closing_ = false;
  void run_lane(uid_t owner);
  static int on_ready(sd_event_source*, int fd, uint32_t, void* ud);

  int event_fd_ = -1;
  sd_event_source* source_ = nullptr;
  std::mutex mu_;
  std::map<uid_t, Lane> lanes_;
  std::deque<Task> finished_;
};

}  // namespace xfer
