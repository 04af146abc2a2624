#include "write_backend.h"
#include "xfer/faults.h"

#include <linux/aio_abi.h>
#include <liburing.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>

#include "xfer/log.h"

namespace xfer {

namespace {

constexpr size_t kKeptBuffers = 16;

struct BufferPool {
  std::mutex mu;
  std::vector<char*> kept;
  ~BufferPool() {
    for (char* b : kept) std::free(b);
  }
};

BufferPool& buffer_pool() {
  static BufferPool pool;
  return pool;
}

}  // namespace

char* take_buffer() {
  BufferPool& pool = buffer_pool();
  {
    std::lock_guard lock(pool.mu);
    if (!pool.kept.empty()) {
      char* b = pool.kept.back();
      pool.kept.pop_back();
      return b;
    }
  }
  void* b = std::aligned_alloc(kMemAlign, kStageBytes);
  if (!b) throw std::bad_alloc();
  return static_cast<char*>(b);
}

void give_buffer(char* b) {
  BufferPool& pool = buffer_pool();
  std::lock_guard lock(pool.mu);
  if (pool.kept.size() < kKeptBuffers) pool.kept.push_back(b);
  else std::free(b);
}

WriteBackend::~WriteBackend() {
  for (auto& w : orphans_) std::free(w->buf);
}

void WriteBackend::orphan(std::unique_ptr<AsyncWrite> w) {
  w->owner = nullptr;
  orphans_.push_back(std::move(w));
}

void WriteBackend::finished(AsyncWrite* w, long long res) {
  --inflight_;
  if (int e = injected_fault("xfer/io/async_write")) res = -e;
  if (w->owner) {
    w->done(w->owner, w, res);
    return;
  }
  auto at = std::find_if(orphans_.begin(), orphans_.end(), [&](const auto& p) { return p.get() == w; });
  if (at != orphans_.end()) {
    give_buffer(w->buf);
    orphans_.erase(at);
  }
}

namespace {

class UringBackend final : public WriteBackend {
 public:
  explicit UringBackend(io_uring ring) : ring_(ring) {}
  ~UringBackend() override {
    while (inflight_ > 0 && reap(1)) {}  // the kernel may still read the buffers freed after
    io_uring_queue_exit(&ring_);
  }
  const char* kind() const override { return "io_uring"; }
  bool submit(AsyncWrite* w, int fd) override {
    if (broken_) {
      errno = EAGAIN;
      return false;
    }
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    if (!sqe) {
      errno = EAGAIN;
      return false;
    }
    io_uring_prep_write(sqe, fd, w->buf, unsigned(w->len), w->offset);
    io_uring_sqe_set_data(sqe, w);
    int rc;
    for (int tries = 0;; ++tries) {
      rc = io_uring_submit(&ring_);
      if (rc >= 1) {
        ++inflight_;
        return true;
      }
      if (rc == -EINTR) continue;
      // Short of kernel resources: let writes in flight finish, then again.
      if ((rc == -EAGAIN || rc == -EBUSY) && tries < 8 && inflight_ > 0 && reap(1)) continue;
      break;
    }
    // The entry stays in the ring, where only a later submit would start
    // it (on a buffer its file then reuses): no more submits; the writes in
    // flight are still reaped, the rest wait for the disk.
    errno = rc < 0 ? -rc : EAGAIN;
    log::warn("io_uring: a write could not be queued ({}); direct writes wait for the disk from here",
              std::strerror(errno));
    broken_ = true;
    return false;
  }
  bool reap(long min) override {
    for (long got = 0;; ++got) {
      io_uring_cqe* cqe = nullptr;
      int rc;
      if (got < min) {
        do rc = io_uring_wait_cqe(&ring_, &cqe);
        while (rc == -EINTR);
      } else {
        rc = io_uring_peek_cqe(&ring_, &cqe);
        if (rc == -EAGAIN) return true;
      }
      if (rc < 0) {
        errno = -rc;
        return false;
      }
      auto* w = static_cast<AsyncWrite*>(io_uring_cqe_get_data(cqe));
      long long res = cqe->res;
      io_uring_cqe_seen(&ring_, cqe);
      finished(w, res);
    }
  }

 private:
  io_uring ring_;
  bool broken_ = false;  // a submit failed: no more (see submit)
};

class LinuxAioBackend final : public WriteBackend {
 public:
  explicit LinuxAioBackend(aio_context_t id) : id_(id) {}
  ~LinuxAioBackend() override { syscall(SYS_io_destroy, id_); }  // waits for what is still in flight
  const char* kind() const override { return "linux-aio"; }
  bool submit(AsyncWrite* w, int fd) override {
    // The control block lives as long as the write: one per write, freed when reaped.
    auto* cb = new Cb{};
    cb->w = w;
    cb->cb.aio_data = reinterpret_cast<uintptr_t>(cb);
    cb->cb.aio_lio_opcode = IOCB_CMD_PWRITE;
    cb->cb.aio_fildes = uint32_t(fd);
    cb->cb.aio_buf = reinterpret_cast<uintptr_t>(w->buf);
    cb->cb.aio_nbytes = w->len;
    cb->cb.aio_offset = int64_t(w->offset);
    iocb* cbs[1] = {&cb->cb};
    long rc;
    do rc = syscall(SYS_io_submit, id_, 1L, cbs);
    while (rc < 0 && errno == EINTR);
    if (rc != 1) {
      int err = errno;
      delete cb;
      errno = err;
      return false;
    }
    ++inflight_;
    return true;
  }
  bool reap(long min) override {
    io_event ev[64];
    long n;
    do n = syscall(SYS_io_getevents, id_, std::min<long>(min, 64), 64L, ev, nullptr);
    while (n < 0 && errno == EINTR);
    if (n < 0) return false;
    for (long k = 0; k < n; ++k) {
      std::unique_ptr<Cb> cb(reinterpret_cast<Cb*>(uintptr_t(ev[k].data)));
      finished(cb->w, ev[k].res);
    }
    return true;
  }

 private:
  struct Cb {
    iocb cb{};
    AsyncWrite* w = nullptr;
  };
  aio_context_t id_;
};

// Neither is to be had: the caller writes with pwrite and waits.
class SyncBackend final : public WriteBackend {
 public:
  const char* kind() const override { return "none"; }
  bool asynchronous() const override { return false; }
  bool submit(AsyncWrite*, int) override {
    errno = EOPNOTSUPP;
    return false;
  }
  bool reap(long) override { return true; }
};

std::unique_ptr<WriteBackend> probe(const std::string& who) {
  io_uring ring{};
  int rc = injected_fault("xfer/io/io_uring") ? -EPERM : io_uring_queue_init(WriteBackend::kEvents, &ring, 0);
  if (rc == 0) return std::make_unique<UringBackend>(ring);
  aio_context_t id = 0;
  if (syscall(SYS_io_setup, WriteBackend::kEvents, &id) == 0) {
    log::info("{}: no io_uring ({}); direct writes go through Linux AIO", who, std::strerror(-rc));
    return std::make_unique<LinuxAioBackend>(id);
  }
  log::warn("{}: no io_uring ({}) and no Linux AIO context ({}); direct writes wait for the disk", who,
            std::strerror(-rc), std::strerror(errno));
  return std::make_unique<SyncBackend>();
}

thread_local std::unique_ptr<WriteBackend> t_backend;

}  // namespace

WriteBackend& WriteBackend::of_thread(const std::string& who) {
  if (!t_backend) t_backend = probe(who);
  return *t_backend;
}

std::string WriteBackend::thread_kind() { return t_backend ? t_backend->kind() : ""; }

}  // namespace xfer
