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
// The final name appears only after size (and sha256, when given) verify,
// via fsync + renameat2(RENAME_NOREPLACE): never a half-written final file,
// never an existing file overwritten.
#pragma once

#include <cstdint>
#include <sys/types.h>

#include <optional>
#include <stdexcept>
#include <string>
#include <system_error>

#include "xfer/ranges.h"

namespace xfer {

// A failed system call on the destination, with the path it concerned.
class IoError : public std::system_error {
 public:
  IoError(int err, const std::string& what) : std::system_error(err, std::generic_category(), what) {}
};

// The downloaded bytes do not match what the manifest promised.
class VerifyError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Who the engine's files belong to. The daemon runs as root and writes into
// the caller's directory: every file it creates there is chowned to the caller,
// and an existing .part is reused only when it is the caller's own regular file
// with a single link (never a file someone planted to make root write elsewhere).
struct FileOwner {
  uid_t uid = static_cast<uid_t>(-1);
  gid_t gid = static_cast<gid_t>(-1);
  bool set() const { return uid != static_cast<uid_t>(-1); }
};

class PartFile {
 public:
  static constexpr const char* kPartSuffix = ".part";
  static constexpr const char* kProgressSuffix = ".part.progress";
  static constexpr size_t kLongestSuffix = 18;  // ".part.progress.tmp"
  // True for names the engine writes itself (a manifest may not ask for them).
  static bool is_engine_name(const std::string& name);

  // Opens or creates NAME.part in dir_fd (O_NOFOLLOW). A progress record that
  // matches url and size is loaded; one that does not is discarded with the
  // .part contents, and resumed_bytes() says 0.
  PartFile(int dir_fd, std::string name, std::string url, std::optional<uint64_t> size,
           std::string sha256, FileOwner owner = {});
  ~PartFile();
  PartFile(const PartFile&) = delete;
  PartFile& operator=(const PartFile&) = delete;

  const std::string& name() const { return name_; }
  std::optional<uint64_t> size() const { return size_; }
  // Size learned from the server for a file the manifest gave none for.
  void set_size(uint64_t size);

  // Writes len bytes at offset; throws IoError (ENOSPC, EIO, ...).
  void write(uint64_t offset, const char* data, size_t len);
  // Everything written so far (durable or not).
  const RangeSet& received() const { return received_; }
  uint64_t resumed_bytes() const { return resumed_bytes_; }
  bool complete() const;

  // Atomically rewrite the record with what has been written (no data sync).
  void record_written();
  // fdatasync, then rewrite the record: everything written is now synced.
  void checkpoint();
  // Forget all bytes (the server ignored a Range request): truncate to 0.
  void reset();
  // Verify size and sha256, fsync, rename to the final name, drop the record.
  // Throws VerifyError (bad content; the .part is removed) or IoError.
  void finish();
  // Stop without finishing: checkpoint (synced), and remove the .part when it
  // holds no byte worth keeping.
  void close_for_resume();
  // Remove .part and record (content known to be bad).
  void discard();

 private:
  void load_record();
  void write_record(bool sync);
  void unlink_quiet(const std::string& n);

  int create(const std::string& n, int flags);  // a new file, owned by owner_

  int dir_fd_;
  FileOwner owner_;
  int fd_ = -1;
  std::string name_, url_, sha256_;
  std::optional<uint64_t> size_;
  RangeSet received_;  // written (in the page cache at least)
  RangeSet durable_;   // synced to disk
  bool unrecorded_ = false;  // received_ grew since the record was written
  bool unsynced_ = false;    // received_ grew since the last fdatasync
  bool unflushed_ = false;   // written since writeback was last started
  uint64_t resumed_bytes_ = 0;
};

// This boot's id (/proc/sys/kernel/random/boot_id).
const std::string& boot_id();

// Helpers on an already open destination directory.
// True when NAME exists in dir_fd (not following a final symlink).
bool name_exists(int dir_fd, const std::string& name, uint64_t* size = nullptr);

}  // namespace xfer
