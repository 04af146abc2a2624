#include "xfer/part_file.h"
#include "xfer/faults.h"

#include <fcntl.h>
#include <map>
#include <sys/statvfs.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>
#include <utility>

#include <sys/file.h>

#include "write_backend.h"
#include "xfer/boot.h"
#include "xfer/log.h"
#include "xfer/progress_record.h"
#include "xfer/sha256.h"

namespace xfer {

static_assert(PartFile::kStageBytes == kStageBytes, "the staging buffers are the write backend's");

bool name_exists(int dir_fd, const std::string& name, uint64_t* size) {
  struct stat st;
  if (fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return false;
  if (size) *size = static_cast<uint64_t>(st.st_size);
  return true;
}

// xferd writes as root, and ext4 keeps its reserved blocks (5% by default)
// for root: a caller's file would go on filling /home or /var after the
// caller's own writes get ENOSPC, eating the room kept for root's services.
// A caller's bytes count against what the caller could write (statvfs
// f_bavail, the blocks free to users): past it the write fails with ENOSPC
// as the caller's own would, and the job pauses with the reason. statvfs is
// asked again once half of what it said was free has been claimed, so the
// files of every job on one file system together stay under it.
// dev is the file's st_dev (looked up once, when the file is opened).
static void claim_owner_space(int fd, dev_t dev, const FileOwner& owner, uint64_t len, const std::string& name) {
  if (!owner.set() || owner.uid == 0) return;
  static std::mutex mu;
  static std::map<dev_t, uint64_t> budget;  // bytes that may still be claimed before statvfs is asked again
  std::lock_guard lock(mu);
  uint64_t& left = budget[dev];
  if (len <= left) {
    left -= len;
    return;
  }
  struct statvfs sv;
  if (fstatvfs(fd, &sv) != 0) return;
  uint64_t avail = uint64_t(sv.f_bavail) * sv.f_frsize;
  if (avail < len) {
    left = 0;
    throw IoError(ENOSPC, "write " + name + PartFile::kPartSuffix + ": uid " + std::to_string(owner.uid) + " has " + std::to_string(avail) +
                              " bytes left on this file system (what is left is reserved for root)");
  }
  left = (avail - len) / 2;
}

PartFile::PartFile(int dir_fd, std::string name, std::string url, std::optional<uint64_t> size,
                   std::string sha256, FileOwner owner, bool direct)
    : dir_fd_(dir_fd), owner_(owner), name_(std::move(name)), url_(std::move(url)), sha256_(std::move(sha256)), size_(size) {
  std::string part = name_ + kPartSuffix;
  // One writer per name: another job (of this xferd, another xferd, or an
  // xferctl run) that holds NAME.part keeps it; this job's file fails (EBUSY,
  // which the engine waits out a while: a commit of an earlier run of the
  // same job may hold it for a moment). The lock is taken on what the name
  // held when it was opened: a file renamed away meanwhile (a commit that
  // gave it its final name, then let the lock go) is not the .part, and the
  // name is opened again, so that nothing is ever written to, or truncated
  // at, a final name.
  for (int attempt = 0;; ++attempt) {
    fd_ = create_owned(dir_fd_, part, O_RDWR, owner_);
    if (fd_ < 0 && errno == EEXIST) {
      fd_ = open_regular(dir_fd_, part, O_RDWR, owner_);  // throws NameRefused for anything but the owner's file
      if (fd_ < 0) throw NameRefused(EAGAIN, part + " vanished while it was opened; not touched");
    }
    if (fd_ < 0) throw IoError(errno, "open " + part);
    if (flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      int err = errno;
      ::close(fd_);
      fd_ = -1;
      if (err == EWOULDBLOCK)
        throw NameRefused(EBUSY, part + " is being written by another transfer (another job or xferctl run); left to it");
      throw IoError(err, "lock " + part);
    }
    struct stat held, named;
    bool same = fstat(fd_, &held) == 0 && fstatat(dir_fd_, part.c_str(), &named, AT_SYMLINK_NOFOLLOW) == 0 &&
                held.st_dev == named.st_dev && held.st_ino == named.st_ino;
    if (same) break;
    ::close(fd_);
    fd_ = -1;
    if (attempt == 3) throw NameRefused(EBUSY, part + " keeps changing while it is opened; left alone");
  }
  try {
    load_record();
  } catch (...) {
    ::close(fd_);
    fd_ = -1;
    throw;
  }
  struct stat st {};
  fstat(fd_, &st);
  dev_ = st.st_dev;
  if (size_ && *size_ >= kReserveFrom) {
    // Reserve the space now: a full disk fails here, clearly, before any byte is fetched.
    uint64_t allocated = uint64_t(st.st_blocks) * 512;
    int rc = 0;
    try {
      if (*size_ > allocated) claim_owner_space(fd_, dev_, owner_, *size_ - allocated, name_);
    } catch (const IoError& e) {
      rc = e.code().value();
    }
    if (rc == 0) rc = fault("xfer/io/fallocate") ? errno : posix_fallocate(fd_, 0, static_cast<off_t>(*size_));
    if (rc == ENOSPC || rc == EDQUOT || rc == EFBIG) {
      ::close(fd_);
      fd_ = -1;
      throw IoError(rc, "reserve " + std::to_string(*size_) + " bytes for " + part);
    }
    reserved_ = rc == 0;
  }
  if (direct && size_ && *size_ >= kDirectFrom) open_direct();
}

// A second descriptor of the same open file, with O_DIRECT: reopened through
// /proc/self/fd (our own descriptor, not a name in the destination, so the
// link it follows is not one a user planted), and checked to be the same
// inode. The file system's alignment comes from statx (STATX_DIOALIGN);
// direct writes begin and end on a page at least, so that no page is
// written both through the page cache (a head or a tail) and with O_DIRECT.
// A direct write over a page another stream had just dirtied could not drop
// its cached copy ("Page cache invalidation failure on direct I/O"), and the
// next fsync failed with EIO: on a loop device (512-byte alignment) the
// ranges a capped job asked for in c60352d, which ended every few hundred
// KB at odd offsets, stopped a bench run on it.
void PartFile::open_direct() {
  static std::once_flag said;
  auto fallback = [&](const std::string& why) {
    std::call_once(said, [&] {
      log::warn("{}: not written with O_DIRECT ({}); files are written through the page cache where this happens",
                name_ + kPartSuffix, why);
    });
  };
  struct statx sx {};
  if (statx(fd_, "", AT_EMPTY_PATH, STATX_DIOALIGN | STATX_INO, &sx) != 0) return fallback(std::strerror(errno));
  if (!(sx.stx_mask & STATX_DIOALIGN) || sx.stx_dio_offset_align == 0)
    return fallback("the file system does not take direct I/O");
  const uint64_t align = sx.stx_dio_offset_align;
  if ((align & (align - 1)) != 0 || align > kStageBytes || sx.stx_dio_mem_align > kMemAlign)
    return fallback("the file system asks for an alignment of " + std::to_string(align) + " bytes");
  std::string self = "/proc/self/fd/" + std::to_string(fd_);
  int fd = open(self.c_str(), O_WRONLY | O_DIRECT | O_CLOEXEC);
  if (fd < 0) return fallback("reopen: " + std::string(std::strerror(errno)));
  struct stat a, b;
  if (fstat(fd, &a) != 0 || fstat(fd_, &b) != 0 || a.st_dev != b.st_dev || a.st_ino != b.st_ino) {
    ::close(fd);
    return fallback("reopen gave another file");
  }
  dfd_ = fd;
  align_ = std::max<uint64_t>(align, uint64_t(sysconf(_SC_PAGESIZE)));
}

bool PartFile::discard_leftover(int dir_fd, const std::string& name, const std::string& url, FileOwner owner) {
  std::string part = name + kPartSuffix;
  struct stat st;
  if (fstatat(dir_fd, part.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return false;  // the common case: none
  try {
    int fd = open_regular(dir_fd, part, O_RDWR, owner);
    if (fd < 0) return false;
    bool ours = false;
    if (flock(fd, LOCK_EX | LOCK_NB) == 0) {  // nobody is writing it
      try {
        ours = parse_progress_record(read_progress_record(dir_fd, name + kProgressSuffix, owner)).url == url;
      } catch (const std::exception&) {
      }
      if (ours) {
        unlinkat(dir_fd, (name + kProgressSuffix).c_str(), 0);
        unlinkat(dir_fd, part.c_str(), 0);
      }
    }
    ::close(fd);
    return ours;
  } catch (const IoError&) {
    return false;  // not ours to remove
  }
}

std::string PartFile::async_writes() { return WriteBackend::thread_kind(); }

PartFile::~PartFile() {
  wait_all();
  drop_runs();  // staged bytes are in no record: a later run fetches them
  if (dfd_ >= 0) ::close(dfd_);
  unlock_and_close();
}

// The name's lock goes with this writer, at once: a lock is its open file
// description's, which a descriptor held elsewhere (a child forked while the
// file was open, a read still under way) would keep alive, and the next
// run of the same job would find its own file busy.
void PartFile::unlock_and_close() {
  if (fd_ < 0) return;
  // A commit's descriptor shares this open file description, and with it the
  // lock: it stays until the commit has renamed the file (group_commit.cpp).
  if (!plan_out_) flock(fd_, LOCK_UN);
  ::close(fd_);
  fd_ = -1;
}

void PartFile::load_record() {
  std::string text = read_progress_record(dir_fd_, name_ + kProgressSuffix, owner_, &has_record_);
  struct stat st;
  if (fstat(fd_, &st) != 0) throw IoError(errno, "stat " + name_ + kPartSuffix);
  bool usable = false;
  if (!text.empty() && size_) {
    try {
      ProgressRecord rec = parse_progress_record(text);
      if (rec.url == url_ && rec.size == *size_ && rec.sha256 == sha256_) {
        validator_ = rec.validator;
        durable_ = rec.synced;
        // Same boot: pages written before a crash of the process are still there.
        RangeSet trusted = durable_;
        if (rec.boot == boot_id()) trusted.add(rec.written);
        else if (!rec.written.empty()) log::info("{}: machine rebooted since the last run; trusting synced bytes only", name_);
        // Never trust ranges beyond what the .part file actually holds.
        for (const Range& r : trusted.ranges())
          if (r.begin < static_cast<uint64_t>(st.st_size))
            received_.add({r.begin, std::min<uint64_t>(r.end, static_cast<uint64_t>(st.st_size))});
        written_ = received_;
        usable = true;
      } else {
        log::warn("{}: progress record is for another URL, size or sha256; fetching the file again", name_);
      }
    } catch (const std::invalid_argument& e) {
      log::warn("{}: unreadable progress record ({}); fetching the file again", name_, e.what());
    }
  }
  if (!usable) {
    validator_.clear();
    durable_.clear();
    received_.clear();
    written_.clear();
    if (st.st_size > 0 && (fault("xfer/io/ftruncate") || ftruncate(fd_, 0) != 0))
      throw IoError(errno, "truncate " + name_ + kPartSuffix);
    drop_record();
  }
  unsynced_ = received_.bytes() != durable_.bytes();
  resumed_bytes_ = recorded_bytes_ = received_.bytes();
}

void PartFile::set_size(uint64_t size) { size_ = size; }

void PartFile::write(uint64_t offset, const char* data, size_t len) {
  if (!reserved_ || offset + len > size_.value_or(0)) claim_owner_space(fd_, dev_, owner_, len, name_);
  if (dfd_ >= 0) {
    try {
      stage(offset, data, len);
    } catch (const IoError&) {
      forget_unwritten();
      throw;
    }
  } else {
    put(false, offset, data, len);
  }
  received_.add({offset, offset + len});
  unrecorded_ = unsynced_ = true;
}

void PartFile::put(bool direct, uint64_t offset, const char* data, size_t len) {
  size_t done = 0;
  while (done < len) {
    int fd = direct && dfd_ >= 0 ? dfd_ : fd_;
    ssize_t n = fault("xfer/io/pwrite") ? -1 : pwrite(fd, data + done, len - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EINVAL && fd == dfd_) {
      stop_direct();
      continue;
    }
    if (n < 0) throw IoError(errno, "write " + name_ + kPartSuffix);
    if (fd == dfd_ && n % static_cast<ssize_t>(align_) != 0) direct = false;  // a short odd write: the rest buffered
    if (fd == fd_) unflushed_ = true;
    else direct_bytes_ += uint64_t(n);
    done += static_cast<size_t>(n);
  }
  written_.add({offset, offset + len});
}

// The file system refused a direct write after all: the rest of this file
// goes through the page cache, and the log says so. (Writes in flight hold
// their own reference to the file.)
void PartFile::stop_direct() {
  log::warn("{}: O_DIRECT write refused ({}); writing through the page cache", name_ + kPartSuffix,
            std::strerror(EINVAL));
  ::close(dfd_);
  dfd_ = -1;
}

// After a failed write: what is on the file is all this file has received
// (the staged bytes are dropped, the writes in flight waited for), so the
// lost bytes count as missing and are fetched again.
void PartFile::forget_unwritten() {
  drop_runs();
  wait_all();
  received_ = written_;
}

// The bytes before the next aligned offset go through the page cache; from
// there they gather in the stream's run, and each full buffer is written
// with O_DIRECT at its (aligned) offset.
void PartFile::stage(uint64_t offset, const char* data, size_t len) {
  auto it = std::find_if(runs_.begin(), runs_.end(), [&](const Run& r) { return r.begin + r.fill == offset; });
  if (it == runs_.end()) {
    uint64_t head = std::min<uint64_t>(len, (align_ - offset % align_) % align_);
    if (head) {
      put(false, offset, data, size_t(head));
      offset += head, data += head, len -= size_t(head);
    }
    if (len == 0) return;
    if (runs_.size() >= kMaxRuns) flush_run(0);  // the stream staged longest ago
    runs_.push_back(Run{offset, 0, take_buffer()});
    it = runs_.end() - 1;
  }
  while (len > 0) {
    size_t n = std::min(len, kStageBytes - it->fill);
    std::memcpy(it->buf + it->fill, data, n);
    it->fill += n, data += n, len -= n;
    if (it->fill == kStageBytes) {
      char* next = take_buffer();
      submit(it->begin, std::exchange(it->buf, next), kStageBytes);
      it->begin += kStageBytes;
      it->fill = 0;
    }
  }
}

void PartFile::flush_run(size_t i) {
  Run r = runs_[i];
  runs_.erase(runs_.begin() + std::ptrdiff_t(i));
  size_t aligned = size_t(r.fill / align_ * align_);
  try {
    if (r.fill > aligned) put(false, r.begin + aligned, r.buf + aligned, r.fill - aligned);
  } catch (...) {
    give_buffer(r.buf);
    throw;
  }
  if (aligned) submit(r.begin, r.buf, aligned);
  else give_buffer(r.buf);
}

void PartFile::flush_staged() {
  try {
    while (!runs_.empty()) flush_run(runs_.size() - 1);
    settle(true);
  } catch (const IoError&) {
    forget_unwritten();
    throw;
  }
}

void PartFile::submit(uint64_t offset, char* buf, size_t len) {
  WriteBackend& io = io_ ? *io_ : WriteBackend::of_thread(name_ + kPartSuffix);
  if (dfd_ >= 0 && io.asynchronous()) {
    io_ = &io;
    // Room: at most kMaxInFlight of this file's buffers, kEvents in all.
    try {
      while (!inflight_.empty() && inflight_.size() >= kMaxInFlight) settle_one();
      while (io.inflight() >= size_t(WriteBackend::kEvents)) io.reap(1);
      settle(false);
    } catch (...) {
      give_buffer(buf);
      throw;
    }
    auto w = std::make_unique<AsyncWrite>();
    w->owner = this, w->buf = buf, w->offset = offset, w->len = len;
    w->done = [](void* self, AsyncWrite* done, long long res) { static_cast<PartFile*>(self)->written(done, res); };
    if (io.submit(w.get(), dfd_)) {
      inflight_.push_back(std::move(w));
      return;
    }
    // Not queued (EAGAIN, EINVAL, ...): this one from here, as pwrite does it.
  }
  try {
    put(true, offset, buf, len);
  } catch (...) {
    give_buffer(buf);
    throw;
  }
  give_buffer(buf);
}

// Waits for one of the thread's writes to finish (this file's or another's).
void PartFile::settle_one() {
  if (!io_->reap(1)) {
    int err = errno;
    wait_all();
    throw IoError(err, "wait for the writes of " + name_ + kPartSuffix);
  }
}

void PartFile::settle(bool wait) {
  if (!inflight_.empty() && !wait && !write_err_ && !io_->reap(0)) settle_one();
  if (wait || write_err_)  // a failure: no write of this file left in flight before it is reported
    while (!inflight_.empty()) settle_one();
  if (write_err_) throw IoError(std::exchange(write_err_, 0), "write " + name_ + kPartSuffix);
}

void PartFile::written(AsyncWrite* w, long long res) {
  auto at = std::find_if(inflight_.begin(), inflight_.end(), [&](const auto& p) { return p.get() == w; });
  if (at == inflight_.end()) return;
  std::unique_ptr<AsyncWrite> done = std::move(*at);
  inflight_.erase(at);
  if (res == static_cast<long long>(done->len)) {
    written_.add({done->offset, done->offset + done->len});
    direct_bytes_ += done->len;
  } else if (!write_err_ && (res >= 0 || res == -EINVAL)) {
    // Short, or refused by the file system after all: the rest through the
    // page cache, as put() does.
    size_t did = res > 0 ? size_t(res) : 0;
    if (did) written_.add({done->offset, done->offset + did});
    if (res == -EINVAL && dfd_ >= 0) stop_direct();
    try {
      put(false, done->offset + did, done->buf + did, done->len - did);
    } catch (const IoError& e) {
      write_err_ = e.code().value() ? e.code().value() : EIO;
    }
  } else if (!write_err_) {
    write_err_ = res < 0 ? int(-res) : EIO;
  }
  give_buffer(done->buf);
}

void PartFile::wait_all() noexcept {
  while (!inflight_.empty()) {
    if (io_->reap(1)) continue;
    // io_getevents itself fails: the kernel may still read these buffers.
    log::warn("{}: cannot wait for its writes ({}); their bytes count as missing", name_ + kPartSuffix,
              std::strerror(errno));
    for (auto& w : inflight_) io_->orphan(std::move(w));
    inflight_.clear();
  }
  write_err_ = 0;
}

void PartFile::drop_runs() {
  for (Run& r : runs_) give_buffer(r.buf);
  runs_.clear();
}

bool PartFile::complete() const {
  return size_ && received_.contains({0, *size_});
}

void PartFile::record_written() {
  if (!inflight_.empty()) {
    try {
      settle(false);  // the writes that have finished go in the record
    } catch (const IoError&) {
      forget_unwritten();
      throw;
    }
  }
  // Start writeback of what arrived since the last call, without waiting for
  // it: the dirty pages go to disk in the background, so the periodic
  // fdatasync (and the fsync at the end) find little left to do and do not
  // stall the event loop. Measured on xfer-linkemu, 2 x 222 MB at 500 Mbit/s:
  // without it, each 5-s fdatasync held the loop 1-2 s (0 Mbit/s intervals).
  if (unflushed_) {
    if (sync_file_range(fd_, 0, 0, SYNC_FILE_RANGE_WRITE) != 0 && errno != ESPIPE && errno != EINVAL)
      throw IoError(errno, "writeback " + name_ + kPartSuffix);
    unflushed_ = false;
  }
  if (!unrecorded_ || !size_) return;  // without a size there is nothing to resume
  write_record(false);
  unrecorded_ = false;
}

void PartFile::checkpoint() {
  if (!size_ || (!unsynced_ && !unrecorded_)) return;
  flush_staged();
  if (unsynced_ && (fault("xfer/io/fdatasync") || fdatasync(fd_) != 0)) throw IoError(errno, "sync " + name_ + kPartSuffix);
  durable_ = written_;
  unsynced_ = false;
  write_record(true);
  unrecorded_ = false;
}

void PartFile::write_record(bool sync) {
  ProgressRecord rec{url_, sha256_, boot_id(), validator_, *size_, durable_, written_};
  write_progress_record(dir_fd_, name_ + kProgressSuffix, to_text(rec), owner_, sync);
  has_record_ = true;
  recorded_bytes_ = written_.bytes();
}

void PartFile::forget_all() {
  wait_all();
  drop_runs();
  received_.clear();
  written_.clear();
  direct_bytes_ = 0;
  durable_.clear();
  recorded_bytes_ = 0;
  unrecorded_ = unsynced_ = false;
}

void PartFile::reset() {
  forget_all();
  validator_.clear();
  if (fault("xfer/io/ftruncate") || ftruncate(fd_, 0) != 0) throw IoError(errno, "truncate " + name_ + kPartSuffix);
  drop_record();
}

void PartFile::finish() {
  check_size();
  if (!sha256_.empty()) verify_sha256(sha256_fd(fd_, name_ + kPartSuffix));
  commit();
}

void PartFile::check_size() {
  flush_staged();
  std::string part = name_ + kPartSuffix;
  struct stat st;
  if (fstat(fd_, &st) != 0) throw IoError(errno, "stat " + part);
  uint64_t have = static_cast<uint64_t>(st.st_size);
  if (size_ && have != *size_) {
    discard();
    throw VerifyError("size mismatch: expected " + std::to_string(*size_) + " bytes, got " + std::to_string(have));
  }
}

int PartFile::dup_fd() const {
  int fd = fcntl(fd_, F_DUPFD_CLOEXEC, 0);
  if (fd < 0) throw IoError(errno, "dup " + name_ + kPartSuffix);
  return fd;
}

int PartFile::reader_fd() const {
  // The same file through its descriptor's /proc link: no name to race on,
  // and an open file description of its own, which the writer's flock is not
  // on (a dup would hold this name's lock for as long as the reader runs).
  int fd = open(("/proc/self/fd/" + std::to_string(fd_)).c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY);
  if (fd >= 0) return fd;
  static bool said = false;
  if (!said) {
    said = true;
    log::warn("{}: /proc/self/fd cannot reopen it ({}): checksums read through a duplicate, which holds the file's "
              "lock until they end (a job resumed meanwhile finds its files busy)",
              name_ + kPartSuffix, strerror(errno));
  }
  return dup_fd();
}

void PartFile::verify_sha256(const std::string& got) {
  if (got == sha256_) return;
  discard();
  throw VerifyError("sha256 mismatch: expected " + sha256_ + ", got " + got);
}

CommitPlan PartFile::commit_plan() {
  plan_out_ = true;
  return {dup_fd(), dir_fd_, name_ + kPartSuffix, name_, has_record_ ? name_ + kProgressSuffix : std::string(),
          direct_bytes_};
}

void PartFile::release() {
  wait_all();   // none: check_size waited for them before the commit was planned
  drop_runs();
  if (dfd_ >= 0) ::close(dfd_);
  if (fd_ >= 0) ::close(fd_);  // the lock stays with a commit batch's descriptor until it is done
  fd_ = dfd_ = -1;
}

void PartFile::commit() {
  std::vector<CommitPlan> one = {commit_plan()};
  CommitOutcome o = commit_files(one).front();
  if (o.err == EEXIST) throw NameRefused(o.err, o.what);
  if (o.err) throw IoError(o.err, o.what);
  release();
}

void PartFile::close_for_resume() {
  if (fd_ < 0) return;
  try {
    checkpoint();
  } catch (const IoError& e) {
    log::warn("{}: could not save progress: {}", name_, e.what());
  }
  if (received_.empty()) {
    unlink_quiet(name_ + kPartSuffix);
    drop_record();
  }
  if (fd_ >= 0 && !plan_out_) flock(fd_, LOCK_UN);  // see unlock_and_close
  release();
}

void PartFile::discard() {
  forget_all();
  unlink_quiet(name_ + kPartSuffix);
  drop_record();
}

void PartFile::unlink_quiet(const std::string& n) { unlinkat(dir_fd_, n.c_str(), 0); }

void PartFile::drop_record() {
  if (has_record_) unlink_quiet(name_ + kProgressSuffix);
  has_record_ = false;
}

}  // namespace xfer
