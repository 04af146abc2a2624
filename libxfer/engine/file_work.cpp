#include "file_work.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <stdexcept>

#include "xfer/log.h"

namespace xfer {

FileWork::FileWork(sd_event* loop) {
  event_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (event_fd_ < 0) throw std::runtime_error(std::string("eventfd: ") + strerror(errno));
  int r = sd_event_add_io(loop, &source_, event_fd_, EPOLLIN, &FileWork::on_ready, this);
  if (r < 0) {
    close(event_fd_);
    throw std::runtime_error(std::string("sd_event_add_io: ") + strerror(-r));
  }
}

FileWork::~FileWork() {
  std::map<uid_t, Lane> lanes;
  {
    std::lock_guard<std::mutex> g(mu_);
    closing_ = true;
    for (auto& [uid, lane] : lanes_) {
      for (Task& t : lane.queue) *t.stop = true;
      lane.more.notify_all();
    }
  }
  // The threads drain their queues (every task stopped) and end.
  for (auto& [uid, lane] : lanes_)
    if (lane.thread.joinable()) lane.thread.join();
  sd_event_source_disable_unref(source_);
  close(event_fd_);
}

FileWork::Handle FileWork::post(uid_t owner, Work work, Done done, Cancel on_cancel) {
  auto stop = std::make_shared<Stop>(false);
  std::lock_guard<std::mutex> g(mu_);
  Lane& lane = lanes_[owner];
  lane.queue.push_back(Task{stop, std::move(work), std::move(done), {}, {}, log::current_job(), on_cancel});
  lane.more.notify_one();
  if (!lane.busy) {
    if (lane.thread.joinable()) lane.thread.join();  // it has said it is done: it ends at once
    lane.busy = true;
    lane.thread = std::thread(&FileWork::run_lane, this, owner);
  }
  return Handle(stop);
}

void FileWork::run_lane(uid_t owner) {
  for (;;) {
    Task t;
    {
      std::unique_lock<std::mutex> g(mu_);
      Lane& lane = lanes_[owner];
      lane.more.wait_for(g, std::chrono::milliseconds(kLingerMs), [&] { return closing_ || !lane.queue.empty(); });
      if (lane.queue.empty()) {
        lane.busy = false;
        return;
      }
      t = std::move(lane.queue.front());
      lane.queue.pop_front();
    }
    if (*t.stop && t.on_cancel == Cancel::Skips) continue;
    try {
      t.result = t.work(*t.stop);
    } catch (...) {
      t.error = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> g(mu_);
      finished_.push_back(std::move(t));
    }
    uint64_t one = 1;
    if (write(event_fd_, &one, sizeof one) < 0 && errno != EAGAIN)
      log::error("file work: eventfd write failed: {}", strerror(errno));
  }
}

int FileWork::on_ready(sd_event_source*, int fd, uint32_t, void* ud) {
  auto* self = static_cast<FileWork*>(ud);
  uint64_t n;
  while (read(fd, &n, sizeof n) > 0) {
  }
  std::deque<Task> done;
  {
    std::lock_guard<std::mutex> g(self->mu_);
    done.swap(self->finished_);
  }
  // Cancelling happens on this thread too: a task seen here not stopped
  // still has an owner waiting for it.
  for (Task& t : done) {
    log::JobScope scope(t.log_job);
    if (!*t.stop) t.done(std::move(t.result), t.error);
  }
  return 0;
}

}  // namespace xfer
