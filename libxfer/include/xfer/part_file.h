// A file being downloaded: NAME.part written with pwrite at its offsets, and
// NAME.part.progress, the record of which byte ranges are durably on disk, so
// that a job killed with -9 resumes by fetching only what is missing.
//
// The record holds two range sets. `synced`: ranges made durable by
// fdatasync() of the .part file. `written`: ranges handed to the kernel with
// pwrite(), recorded often and cheaply. A process that dies (kill -9) leaves
// its writes in the page cache, so a resume in the same boot (same
// /proc/sys/kernel/random/boot_id) trusts `written`; after a reboot, where
// unsynced pages may be lost, only `synced` is trusted.
// A file of kDirectFrom bytes or more (its size known) is written with
// O_DIRECT where its file system allows it: the bytes are copied into
// aligned staging buffers, one per stream of the file, and each full buffer
// goes to disk from there, asynchronously (io_uring, or Linux AIO where
// io_uring is refused: the loop goes on receiving while the disk writes; at
// most kMaxInFlight buffers a file, one ring for all files of a thread).
// No page cache is filled (a bulk
// download does not evict other programs' cached files), and there is no
// writeback left for a sync to do: the page-cache write path and the
// writeback were half of the engine's CPU on one large file (perf, by
// system call). `written` holds only what a finished write put on the file:
// a kill -9 costs what was staged (at most one buffer a stream) and what was
// in flight (at most kMaxInFlight buffers a file). checkpoint() and the commit write and wait for all of it.
// The final name appears only after size (and sha256, when given) verify,
// via fsync + renameat2(RENAME_NOREPLACE): never a half-written final file,
// never an existing file overwritten.
#pragma once

#include <cstdint>
#include <memory>
#include <sys/types.h>

#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "xfer/group_commit.h"
#include "xfer/part_names.h"
#include "xfer/progress_record.h"
#include "xfer/ranges.h"
#include "xfer/safe_open.h"

namespace xfer {

// The downloaded bytes do not match what the manifest promised.
class VerifyError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct AsyncWrite;
class WriteBackend;

class PartFile {
 public:
  static constexpr const char* kPartSuffix = part_names::kPartSuffix;
  static constexpr const char* kProgressSuffix = part_names::kProgressSuffix;
  static constexpr size_t kLongestSuffix = part_names::kLongestSuffix;
  // Files of this size or more get their space reserved when opened (a full
  // disk fails before a byte is fetched, and the file is laid out whole).
  // Below it a full disk fails at the first write, as soon: a fallocate per
  // file was 5% of the engine's CPU on a thousand 100 KB files.
  static constexpr uint64_t kReserveFrom = 1 << 20;
  // Files of this size or more are written with O_DIRECT (see above), in
  // blocks of kStageBytes, with at most kMaxRuns streams staged at once.
  static constexpr uint64_t kDirectFrom = 1 << 20;
  static constexpr size_t kStageBytes = 1 << 20;
  static constexpr size_t kMaxRuns = 8;
  static constexpr size_t kMaxInFlight = 4;
  // Direct writes land inside the reserved size: an AIO write that extends
  // a file is done synchronously by ext4, one within it is not.
  static_assert(kDirectFrom >= kReserveFrom);
  // True for names the engine writes itself (a manifest may not ask for them).
  static bool is_engine_name(const std::string& name) { return part_names::is_engine_name(name); }

  // Opens or creates NAME.part in dir_fd (open_regular: no symlink, no FIFO,
  // the owner's own file) and takes an exclusive lock on it, so that no other
  // transfer (another job, another process) writes the same name meanwhile.
  // A progress record that matches url, size and sha256 is loaded; one that
  // does not is discarded with the .part contents, and resumed_bytes() says 0.
  // Throws NameRefused when the name is not this job's to use (the file
  // fails), IoError when the destination fails (full, read-only, ...).
  // direct: write with O_DIRECT when the size is kDirectFrom or more and the
  // file system takes it (a file system that does not is logged, once, and
  // the file is written through the page cache).
  PartFile(int dir_fd, std::string name, std::string url, std::optional<uint64_t> size,
           std::string sha256, FileOwner owner = {}, bool direct = false);
  ~PartFile();
  PartFile(const PartFile&) = delete;
  PartFile& operator=(const PartFile&) = delete;

  const std::string& name() const { return name_; }
  std::optional<uint64_t> size() const { return size_; }
  // Size learned from the server for a file the manifest gave none for.
  void set_size(uint64_t size);
  // The version of the source the bytes on file are of (validator.h): kept
  // in the progress record from the first response on, so that a resume
  // asks for the rest of the same version (If-Range) and a change of the
  // source is seen. "" none (the server gave none yet, or ever); reset()
  // forgets it with the bytes.
  const std::string& validator() const { return validator_; }
  void set_validator(std::string v) {
    validator_ = std::move(v);
    unrecorded_ = true;
  }

  // Writes len bytes at offset (or stages them, with O_DIRECT); throws
  // IoError (ENOSPC, EIO, ...). After a failure, received() holds only
  // what is on the file, and the staged bytes that were lost are missing.
  void write(uint64_t offset, const char* data, size_t len);
  // Whether this file is written with O_DIRECT.
  bool direct() const { return dfd_ >= 0; }
  // Where O_DIRECT writes begin and end: a page, or the file system's
  // alignment where that is larger (0: not direct).
  uint64_t direct_align() const { return dfd_ >= 0 ? align_ : 0; }
  // How the calling thread's direct writes go to disk: "io_uring",
  // "linux-aio" (io_uring refused), "none" (both refused: they wait for the
  // disk), or "" (no direct write yet).
  static std::string async_writes();
  // Everything received so far (written or staged, durable or not).
  const RangeSet& received() const { return received_; }
  uint64_t resumed_bytes() const { return resumed_bytes_; }
  bool complete() const;

  // Bytes written since the record was last rewritten, and since the last sync.
  uint64_t unrecorded_bytes() const { return received_.bytes() - recorded_bytes_; }
  uint64_t unsynced_bytes() const { return received_.bytes() - durable_.bytes(); }
  // Atomically rewrite the record with what has been written (no data sync).
  void record_written();
  // fdatasync, then rewrite the record: everything written is now synced.
  void checkpoint();
  // Forget all bytes (the server ignored a Range request): truncate to 0.
  void reset();
  // Verify size and sha256, sync, rename to the final name, drop the record.
  // Throws VerifyError (bad content; the .part is removed) or IoError.
  void finish();
  // finish() in steps, so that the long ones run off the loop: check_size()
  // (throws as finish does); then, with a descriptor of its own (dup_fd(),
  // anywhere), the sha256 (verify_sha256()); then the commit: commit_plan()
  // for commit_files() (anywhere: sync, rename, drop the record; many files
  // at once). commit() is the three for one file.
  void check_size();
  int dup_fd() const;
  // A read-only descriptor of the same file with an open file description of
  // its own (the sha256 check off the loop): it does not hold the writer's lock.
  int reader_fd() const;
  const std::string& expected_sha256() const { return sha256_; }
  void verify_sha256(const std::string& got);  // a mismatch discards and throws VerifyError
  using CommitPlan = xfer::CommitPlan;
  // A plan's descriptor shares this file's lock: until plan_done() (its commit
  // ended) this PartFile never drops the lock itself, only closes.
  CommitPlan commit_plan();
  void plan_done() { plan_out_ = false; }
  void release();  // close the descriptor only: the file is committed, or a commit in flight owns it
  void commit();
  // Stop without finishing: checkpoint (synced), and remove the .part when it
  // holds no byte worth keeping.
  void close_for_resume();
  // Remove .part and record (content known to be bad, or the job cancelled).
  void discard();
  // A job cancelled before it opened NAME.part: its leftover of an earlier
  // run (the owner's file, with a record for url) is removed. True if it was.
  static bool discard_leftover(int dir_fd, const std::string& name, const std::string& url, FileOwner owner);

 private:
  void unlock_and_close();
  void load_record();
  void write_record(bool sync);
  void unlink_quiet(const std::string& n);
  void drop_record();  // remove the record if there is one (no failing unlink a file)

  void open_direct();
  // pwrite all of it, with O_DIRECT or through the page cache; adds to written_.
  void put(bool direct, uint64_t offset, const char* data, size_t len);
  void stage(uint64_t offset, const char* data, size_t len);
  void flush_run(size_t i);  // writes runs_[i] (its aligned part with O_DIRECT) and drops it
  void flush_staged();       // every run; on a failure, forgets what was staged and throws
  void drop_runs();
  void forget_unwritten();  // after a failed write: received() is what is on the file
  void stop_direct();       // a direct write refused: the page cache from here
  // Hands a full (aligned) buffer to the disk: an asynchronous write
  // (write_backend.h), or a pwrite where none is to be had. Takes buf.
  void submit(uint64_t offset, char* buf, size_t len);
  // Takes this file's finished writes into written_; wait: until none is in
  // flight. Throws IoError for a write that failed (once none is in flight).
  void settle(bool wait);
  void settle_one();  // one of the thread's writes finished (throws IoError when it cannot wait)
  void wait_all() noexcept;  // none in flight (a failure: its bytes stay unwritten)
  // A finished write of this file (from whichever file's settle reaped it).
  void written(AsyncWrite* w, long long res);
  void forget_all();  // every range, staged buffer and write in flight (reset, discard)

  std::vector<std::unique_ptr<AsyncWrite>> inflight_;
  WriteBackend* io_ = nullptr;  // the thread's backend this file's writes went to
  int write_err_ = 0;   // a failed write, thrown by the next settle
  uint64_t direct_bytes_ = 0;  // written with O_DIRECT
  bool reserved_ = false;      // its whole size was allocated when opened (posix_fallocate)
  dev_t dev_ = 0;              // the file system it is on (whose free space a caller's bytes are charged to)

  // Bytes of one stream waiting in an aligned buffer: [begin, begin + fill).
  struct Run {
    uint64_t begin = 0;
    size_t fill = 0;
    char* buf = nullptr;
  };

  int dir_fd_;
  FileOwner owner_;
  int fd_ = -1;
  std::string name_, url_, sha256_, validator_;
  std::optional<uint64_t> size_;
  int dfd_ = -1;        // the same file opened with O_DIRECT, or -1
  uint64_t align_ = 0;  // its offset alignment (direct_align)
  std::vector<Run> runs_;
  RangeSet received_;  // written or staged
  RangeSet written_;   // written (in the page cache at least, or on disk)
  RangeSet durable_;   // synced to disk
  bool unrecorded_ = false;  // received_ grew since the record was written
  bool unsynced_ = false;    // received_ grew since the last fdatasync
  bool unflushed_ = false;   // written since writeback was last started
  uint64_t resumed_bytes_ = 0;
  bool has_record_ = false;  // NAME.part.progress was found or written
  bool plan_out_ = false;    // a commit plan holds a descriptor of this file
  uint64_t recorded_bytes_ = 0;  // written_.bytes() in the record
};

// Helpers on an already open destination directory.
// True when NAME exists in dir_fd (not following a final symlink).
bool name_exists(int dir_fd, const std::string& name, uint64_t* size = nullptr);

}  // namespace xfer
