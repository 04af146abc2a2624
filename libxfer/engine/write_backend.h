// How a thread's direct (O_DIRECT) writes go to disk, chosen once per thread
// by a probe, in the way power-profiles-daemon picks a driver: io_uring,
// else Linux AIO (io_uring refused: a seccomp filter, io_uring_disabled),
// else synchronous (both refused: each write waits for the disk, and the log
// says so). One backend serves all the files of its thread: setting one up
// and tearing it down per file costs milliseconds each (a set of 100 files
// of 2 MB ran at 0.85x its throughput). io_uring comes first: the teardown
// of a Linux AIO context (io_destroy, and the kernel's at exit) waits for
// two RCU grace periods, 38-45 ms measured here, at the end of every
// `xferctl run`; an io_uring's is deferred to a kernel worker.
//
// Also here: the pool of aligned staging buffers the writes are made from.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace xfer {

// Staging buffers (kStageBytes, aligned for O_DIRECT), kept for the next
// file rather than freed (a file of a few MB would otherwise map and unmap
// one per stream).
constexpr size_t kStageBytes = 1 << 20;
constexpr size_t kMemAlign = 4096;  // at least any file system's dio_mem_align here
char* take_buffer();
void give_buffer(char* b);

// One write in flight. Its owner hears when it finished (done(owner, w,
// res), res: bytes written, or -errno); an owner that gives up waiting hands
// the write to WriteBackend::orphan().
struct AsyncWrite {
  void* owner = nullptr;
  void (*done)(void* owner, AsyncWrite* w, long long res) = nullptr;
  char* buf = nullptr;
  uint64_t offset = 0;
  size_t len = 0;
};

class WriteBackend {
 public:
  static constexpr long kEvents = 256;  // writes in flight at most, over the thread's files
  virtual ~WriteBackend();
  // The calling thread's, probed at its first use (who: named in the log).
  static WriteBackend& of_thread(const std::string& who);
  // What the calling thread's writes use: "io_uring", "linux-aio", "none",
  // or "" (no direct write yet).
  static std::string thread_kind();

  virtual const char* kind() const = 0;
  // Whether writes may be queued (false: each is the caller's pwrite).
  virtual bool asynchronous() const { return true; }
  // Queues one write on fd; false (errno set) when it was not queued.
  virtual bool submit(AsyncWrite* w, int fd) = 0;
  // Finished writes (at least min), each handed to its owner. False when
  // waiting for them fails (not EINTR), errno set.
  virtual bool reap(long min) = 0;

  size_t inflight() const { return inflight_; }
  // A write whose owner gave up on it: freed once reaped, or at exit (the
  // kernel may still read its buffer).
  void orphan(std::unique_ptr<AsyncWrite> w);

 protected:
  void finished(AsyncWrite* w, long long res);  // for reap()
  size_t inflight_ = 0;
  std::vector<std::unique_ptr<AsyncWrite>> orphans_;
};

}  // namespace xfer
