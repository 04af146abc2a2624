#include "xfer/part_file.h"

#include <fcntl.h>
#include <map>
#include <sys/statvfs.h>
#include <linux/aio_abi.h>
#include <liburing.h>
#include <sys/syscall.h>
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

#include "xfer/log.h"
#include "xfer/sha256.h"

namespace xfer {
namespace {

constexpr const char* kRecordMagic = "xferd-progress 2";
// A record this job wrote is a few hundred bytes; one far larger was not
// written by xferd, and parsing it would only cost time.
constexpr size_t kMaxRecordBytes = 1 << 20;
constexpr size_t kMaxRecordRanges = 65536;

// The record, read through open_regular: a FIFO, a directory or somebody
// else's file planted at NAME.part.progress is refused, never waited on.
std::string read_record(int dir_fd, const std::string& name, const FileOwner& owner, bool* found = nullptr) {
  int fd = open_regular(dir_fd, name, O_RDONLY, owner);
  if (found) *found = fd >= 0;
  if (fd < 0) return {};
  std::string s;
  try {
    s = read_bounded(fd, kMaxRecordBytes, name);  // more than the bound: parse_progress_record refuses it
  } catch (const IoError&) {
    s.clear();  // unreadable: no record, the file starts again
  }
  ::close(fd);
  return s;
}

RangeSet parse_ranges(std::string_view text) {
  if (std::count(text.begin(), text.end(), ',') >= std::ptrdiff_t(kMaxRecordRanges))
    throw std::invalid_argument("more than " + std::to_string(kMaxRecordRanges) + " ranges");
  return RangeSet::parse(std::string(text));
}

// Staging buffers, kept for the next file rather than freed (a file of a
// few MB would otherwise map and unmap one per stream).
constexpr size_t kMemAlign = 4096;  // at least any file system's dio_mem_align here
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
  void* b = std::aligned_alloc(kMemAlign, PartFile::kStageBytes);
  if (!b) throw std::bad_alloc();
  return static_cast<char*>(b);
}

void give_buffer(char* b) {
  BufferPool& pool = buffer_pool();
  std::lock_guard lock(pool.mu);
  if (pool.kept.size() < kKeptBuffers) pool.kept.push_back(b);
  else std::free(b);
}

bool ends_with(const std::string& s, const char* suffix) {
  std::string_view sv(suffix);
  return s.size() >= sv.size() && s.compare(s.size() - sv.size(), sv.size(), sv) == 0;
}

}  // namespace

const std::string& boot_id() {
  static const std::string id = [] {
    std::ifstream f("/proc/sys/kernel/random/boot_id");
    std::string s;
    std::getline(f, s);
    return s.empty() ? std::string("unknown") : s;
  }();
  return id;
}

bool PartFile::is_engine_name(const std::string& name) {
  return ends_with(name, kPartSuffix) || ends_with(name, kProgressSuffix) || ends_with(name, ".tmp");
}

bool name_exists(int dir_fd, const std::string& name, uint64_t* size) {
  struct stat st;
  if (fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return false;
  if (size) *size = static_cast<uint64_t>(st.st_size);
  return true;
}

ProgressRecord parse_progress_record(std::string_view text) {
  if (text.size() > kMaxRecordBytes) throw std::invalid_argument("record larger than " + std::to_string(kMaxRecordBytes) + " bytes");
  ProgressRecord rec;
  bool magic = false, size = false;
  size_t pos = 0;
  for (int lineno = 0; pos < text.size(); ++lineno) {
    size_t nl = text.find('\n', pos);
    std::string_view line = text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    pos = nl == std::string_view::npos ? text.size() : nl + 1;
    if (lineno == 0) {
      magic = line == kRecordMagic;
      if (!magic) throw std::invalid_argument("not a progress record of this version");
      continue;
    }
    auto field = [&](std::string_view key, std::string_view* value) {
      if (line.substr(0, key.size()) != key) return false;
      *value = line.substr(key.size());
      return true;
    };
    std::string_view v;
    if (field("url ", &v)) rec.url = v;
    else if (field("size ", &v)) {
      auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), rec.size);
      if (ec != std::errc() || p != v.data() + v.size()) throw std::invalid_argument("bad size");
      size = true;
    } else if (field("sha256 ", &v)) rec.sha256 = v == "-" ? std::string() : std::string(v);
    else if (field("boot ", &v)) rec.boot = v;
    else if (field("synced ", &v)) rec.synced = parse_ranges(v);
    else if (field("written ", &v)) rec.written = parse_ranges(v);
  }
  if (!magic || !size) throw std::invalid_argument("incomplete progress record");
  return rec;
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
  fd_ = create(part, O_RDWR);
  if (fd_ < 0 && errno == EEXIST) {
    fd_ = open_regular(dir_fd_, part, O_RDWR, owner_);  // throws NameRefused for anything but the owner's file
    if (fd_ < 0) throw NameRefused(EAGAIN, part + " vanished while it was opened; not touched");
  }
  if (fd_ < 0) throw IoError(errno, "open " + part);
  // One writer per name: another job (of this xferd, another xferd, or an
  // xferctl run) that holds NAME.part keeps it; this job's file fails.
  if (flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    int err = errno;
    ::close(fd_);
    fd_ = -1;
    if (err == EWOULDBLOCK)
      throw NameRefused(EBUSY, part + " is being written by another transfer (another job or xferctl run); left to it");
    throw IoError(err, "lock " + part);
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
    if (rc == 0) rc = posix_fallocate(fd_, 0, static_cast<off_t>(*size_));
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
// inode. The file system's alignment comes from statx (STATX_DIOALIGN).
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
  align_ = align;
}

int PartFile::create(const std::string& n, int flags) {
  int fd = openat(dir_fd_, n.c_str(), flags | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd >= 0 && owner_.set() && fchown(fd, owner_.uid, owner_.gid) != 0) {
    int err = errno;
    ::close(fd);
    unlinkat(dir_fd_, n.c_str(), 0);
    errno = err;
    return -1;
  }
  return fd;
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
        ours = parse_progress_record(read_record(dir_fd, name + kProgressSuffix, owner)).url == url;
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

struct PartFile::InFlight {
  iocb cb{};
  PartFile* owner = nullptr;  // nullptr: its file gave up waiting (Aio::orphans frees it once reaped, or at exit)
  char* buf = nullptr;
  uint64_t offset = 0;
  size_t len = 0;
};

// One asynchronous-write context for all the files of a thread: an
// io_uring, or where that is refused (a seccomp filter, io_uring_disabled) a
// Linux AIO context, else none (writes wait for the disk, and the log says
// so). Setting one up and tearing it down per file costs milliseconds each
// (a set of 100 files of 2 MB ran at 0.85x its throughput). io_uring first:
// the teardown of a Linux AIO context (io_destroy, and the kernel's at exit)
// waits for two RCU grace periods, 38-45 ms measured here, at the end of
// every `xferctl run`; an io_uring's is deferred to a kernel worker.
struct PartFile::Aio {
  static constexpr long kEvents = 256;
  enum class Kind { None, Uring, Linux };
  Kind kind = Kind::None;
  bool tried = false;
  bool broken = false;  // a submit failed: no more (see submit)
  io_uring ring{};
  aio_context_t id = 0;
  size_t inflight = 0;
  std::vector<std::unique_ptr<InFlight>> orphans;  // their files are gone; the kernel may still use the buffers

  ~Aio() {
    if (kind == Kind::Uring) {
      while (inflight > 0 && reap(1)) {}  // the kernel may still read the buffers freed below
      io_uring_queue_exit(&ring);
    }
    if (kind == Kind::Linux) syscall(SYS_io_destroy, id);  // waits for what is still in flight
    for (auto& w : orphans) std::free(w->buf);
  }
  static Aio& of_thread() {
    thread_local Aio aio;
    return aio;
  }
  bool ready(const std::string& who) {
    if (tried) return kind != Kind::None && !broken;
    tried = true;
    int rc = io_uring_queue_init(kEvents, &ring, 0);
    if (rc == 0) {
      kind = Kind::Uring;
      return true;
    }
    if (syscall(SYS_io_setup, kEvents, &id) == 0) {
      kind = Kind::Linux;
      log::info("{}: no io_uring ({}); direct writes go through Linux AIO", who, std::strerror(-rc));
      return true;
    }
    log::warn("{}: no io_uring ({}) and no Linux AIO context ({}); direct writes wait for the disk", who,
              std::strerror(-rc), std::strerror(errno));
    return false;
  }
  // Queues one write; false (errno set) when it was not queued.
  bool submit(InFlight* w, int fd) {
    if (kind == Kind::Uring) {
      io_uring_sqe* sqe = io_uring_get_sqe(&ring);
      if (!sqe) {
        errno = EAGAIN;
        return false;
      }
      io_uring_prep_write(sqe, fd, w->buf, unsigned(w->len), w->offset);
      io_uring_sqe_set_data(sqe, w);
      int rc;
      for (int tries = 0;; ++tries) {
        rc = io_uring_submit(&ring);
        if (rc >= 1) return true;
        if (rc == -EINTR) continue;
        // Short of kernel resources: let writes in flight finish, then again.
        if ((rc == -EAGAIN || rc == -EBUSY) && tries < 8 && inflight > 0 && reap(1)) continue;
        break;
      }
      // The entry stays in the ring, where only a later submit would start
      // it (on a buffer its file then reuses): no more submits; the writes
      // in flight are still reaped, the rest wait for the disk.
      errno = rc < 0 ? -rc : EAGAIN;
      log::warn("io_uring: a write could not be queued ({}); direct writes wait for the disk from here",
                std::strerror(errno));
      broken = true;
      return false;
    }
    w->cb.aio_data = reinterpret_cast<uintptr_t>(w);
    w->cb.aio_lio_opcode = IOCB_CMD_PWRITE;
    w->cb.aio_fildes = uint32_t(fd);
    w->cb.aio_buf = reinterpret_cast<uintptr_t>(w->buf);
    w->cb.aio_nbytes = w->len;
    w->cb.aio_offset = int64_t(w->offset);
    iocb* cbs[1] = {&w->cb};
    long rc;
    do rc = syscall(SYS_io_submit, id, 1L, cbs);
    while (rc < 0 && errno == EINTR);
    return rc == 1;
  }
  // Finished writes (at least min), each handed to its file. False when
  // waiting for them fails (not EINTR), errno set.
  bool reap(long min) {
    if (kind == Kind::Uring) {
      for (long got = 0;; ++got) {
        io_uring_cqe* cqe = nullptr;
        int rc;
        if (got < min) {
          do rc = io_uring_wait_cqe(&ring, &cqe);
          while (rc == -EINTR);
        } else {
          rc = io_uring_peek_cqe(&ring, &cqe);
          if (rc == -EAGAIN) return true;
        }
        if (rc < 0) {
          errno = -rc;
          return false;
        }
        auto* w = static_cast<InFlight*>(io_uring_cqe_get_data(cqe));
        long long res = cqe->res;
        io_uring_cqe_seen(&ring, cqe);
        finished(w, res);
      }
    }
    io_event ev[64];
    long n;
    do n = syscall(SYS_io_getevents, id, std::min<long>(min, 64), 64L, ev, nullptr);
    while (n < 0 && errno == EINTR);
    if (n < 0) return false;
    for (long k = 0; k < n; ++k) finished(reinterpret_cast<InFlight*>(uintptr_t(ev[k].data)), ev[k].res);
    return true;
  }
  void finished(InFlight* w, long long res) {
    --inflight;
    if (w->owner) {
      w->owner->on_written(w, res);
      return;
    }
    auto at = std::find_if(orphans.begin(), orphans.end(), [&](const auto& p) { return p.get() == w; });
    if (at != orphans.end()) {
      give_buffer(w->buf);
      orphans.erase(at);
    }
  }
};

std::string PartFile::async_writes() {
  const Aio& aio = Aio::of_thread();
  if (!aio.tried) return "";
  return aio.kind == Aio::Kind::Uring ? "io_uring" : aio.kind == Aio::Kind::Linux ? "linux-aio" : "none";
}

PartFile::~PartFile() {
  wait_all();
  drop_runs();  // staged bytes are in no record: a later run fetches them
  if (dfd_ >= 0) ::close(dfd_);
  if (fd_ >= 0) ::close(fd_);
}

void PartFile::load_record() {
  std::string text = read_record(dir_fd_, name_ + kProgressSuffix, owner_, &has_record_);
  struct stat st;
  if (fstat(fd_, &st) != 0) throw IoError(errno, "stat " + name_ + kPartSuffix);
  bool usable = false;
  if (!text.empty() && size_) {
    try {
      ProgressRecord rec = parse_progress_record(text);
      if (rec.url == url_ && rec.size == *size_ && rec.sha256 == sha256_) {
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
    durable_.clear();
    received_.clear();
    written_.clear();
    if (st.st_size > 0 && ftruncate(fd_, 0) != 0) throw IoError(errno, "truncate " + name_ + kPartSuffix);
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
    ssize_t n = pwrite(fd, data + done, len - done, static_cast<off_t>(offset + done));
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
  Aio& aio = aio_ ? *aio_ : Aio::of_thread();
  if (dfd_ >= 0 && aio.ready(name_ + kPartSuffix)) {
    aio_ = &aio;
    // Room: at most kMaxInFlight of this file's buffers, kEvents in all.
    try {
      while (!inflight_.empty() && inflight_.size() >= kMaxInFlight) settle_one();
      while (aio.inflight >= size_t(Aio::kEvents)) aio.reap(1);
      settle(false);
    } catch (...) {
      give_buffer(buf);
      throw;
    }
    auto w = std::make_unique<InFlight>();
    w->owner = this, w->buf = buf, w->offset = offset, w->len = len;
    if (aio.submit(w.get(), dfd_)) {
      ++aio.inflight;
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
  if (!aio_->reap(1)) {
    int err = errno;
    wait_all();
    throw IoError(err, "wait for the writes of " + name_ + kPartSuffix);
  }
}

void PartFile::settle(bool wait) {
  if (!inflight_.empty() && !wait && !write_err_ && !aio_->reap(0)) settle_one();
  if (wait || write_err_)  // a failure: no write of this file left in flight before it is reported
    while (!inflight_.empty()) settle_one();
  if (write_err_) throw IoError(std::exchange(write_err_, 0), "write " + name_ + kPartSuffix);
}

void PartFile::on_written(InFlight* w, long long res) {
  auto at = std::find_if(inflight_.begin(), inflight_.end(), [&](const auto& p) { return p.get() == w; });
  if (at == inflight_.end()) return;
  std::unique_ptr<InFlight> done = std::move(*at);
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
    if (aio_->reap(1)) continue;
    // io_getevents itself fails: the kernel may still read these buffers.
    log::warn("{}: cannot wait for its writes ({}); their bytes count as missing", name_ + kPartSuffix,
              std::strerror(errno));
    for (auto& w : inflight_) {
      w->owner = nullptr;
      aio_->orphans.push_back(std::move(w));
    }
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
  if (unsynced_ && fdatasync(fd_) != 0) throw IoError(errno, "sync " + name_ + kPartSuffix);
  durable_ = written_;
  unsynced_ = false;
  write_record(true);
  unrecorded_ = false;
}

void PartFile::write_record(bool sync) {
  std::ostringstream out;
  out << kRecordMagic << "\nurl " << url_ << "\nsize " << *size_ << "\nsha256 "
      << (sha256_.empty() ? "-" : sha256_) << "\nboot " << boot_id() << "\nsynced " << durable_.to_string()
      << "\nwritten " << written_.to_string() << "\n";
  std::string text = out.str();
  std::string tmp = name_ + kProgressSuffix + ".tmp";
  unlinkat(dir_fd_, tmp.c_str(), 0);  // a leftover (or a planted link) is replaced, never written through
  int fd = create(tmp, O_WRONLY);
  if (fd < 0 && errno == EEXIST) throw NameRefused(EEXIST, tmp + " is held by something that is not a file; not touched");
  if (fd < 0) throw IoError(errno, "open " + tmp);
  ssize_t n = ::write(fd, text.data(), text.size());
  int err = n == static_cast<ssize_t>(text.size()) ? 0 : (n < 0 ? errno : ENOSPC);
  if (!err && sync && fdatasync(fd) != 0) err = errno;
  ::close(fd);
  if (!err && renameat(dir_fd_, tmp.c_str(), dir_fd_, (name_ + kProgressSuffix).c_str()) != 0) err = errno;
  if (!err) has_record_ = true, recorded_bytes_ = written_.bytes();
  if (err) {
    unlink_quiet(tmp);
    if (err == EISDIR || err == ENOTEMPTY || err == EEXIST || err == ENOTDIR)
      throw NameRefused(err, name_ + kProgressSuffix + " is a directory; not replaced");
    throw IoError(err, "write progress record " + name_ + kProgressSuffix);
  }
}

void PartFile::reset() {
  wait_all();
  drop_runs();
  if (ftruncate(fd_, 0) != 0) throw IoError(errno, "truncate " + name_ + kPartSuffix);
  received_.clear();
  written_.clear();
  direct_bytes_ = 0;
  durable_.clear();
  recorded_bytes_ = 0;
  unrecorded_ = unsynced_ = false;
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

void PartFile::verify_sha256(const std::string& got) {
  if (got == sha256_) return;
  discard();
  throw VerifyError("sha256 mismatch: expected " + sha256_ + ", got " + got);
}

PartFile::CommitPlan PartFile::commit_plan() const {
  return {dup_fd(), dir_fd_, name_ + kPartSuffix, name_, has_record_ ? name_ + kProgressSuffix : std::string(),
          direct_bytes_};
}

void PartFile::release() {
  wait_all();   // none: check_size waited for them before the commit was planned
  drop_runs();
  if (dfd_ >= 0) ::close(dfd_);
  if (fd_ >= 0) ::close(fd_);
  fd_ = dfd_ = -1;
}

void PartFile::commit() {
  std::vector<CommitPlan> one = {commit_plan()};
  CommitOutcome o = commit_files(one).front();
  if (o.err == EEXIST) throw NameRefused(o.err, o.what);
  if (o.err) throw IoError(o.err, o.what);
  release();
}

uint64_t dirty_bytes() {
  std::ifstream in("/proc/meminfo");
  for (std::string key; in >> key;) {
    uint64_t kb = 0;
    if (key == "Dirty:" && in >> kb) return kb * 1024;
    in.ignore(256, '\n');
  }
  return UINT64_MAX;
}

bool sync_batch_by_fs(const std::vector<PartFile::CommitPlan>& plans) {
  if (plans.size() < kSyncfsMinFiles) return false;
  uint64_t bytes = 0;
  dev_t dev = 0;
  for (const auto& p : plans) {
    struct stat st;
    if (fstat(p.fd, &st) != 0) return false;
    if (&p != &plans.front() && st.st_dev != dev) return false;
    dev = st.st_dev;
    bytes += uint64_t(st.st_size) - std::min<uint64_t>(uint64_t(st.st_size), p.direct_bytes);
  }
  return dirty_bytes() <= 2 * bytes + kSyncfsSlackBytes;
}

std::vector<CommitOutcome> commit_files(std::vector<PartFile::CommitPlan>& plans) {
  std::vector<CommitOutcome> out(plans.size());
  auto fail = [&](size_t i, int err, const std::string& what) {
    if (!out[i].err) out[i] = {err ? err : EIO, what};
  };
  // Many files at once, and little else waiting to be written on the whole
  // machine: one syncfs of their file system writes them all, with one
  // journal commit (see sync_batch_by_fs). If it reports an error, the
  // fdatasyncs below say which file it was.
  const bool by_fs = sync_batch_by_fs(plans);
  if (!by_fs || syncfs(plans.front().fd) != 0) {
    // Writeback of every file at once, then the waits: the batch's I/O overlaps.
    if (plans.size() > 1)
      for (auto& p : plans) sync_file_range(p.fd, 0, 0, SYNC_FILE_RANGE_WRITE);
    for (size_t i = 0; i < plans.size(); ++i)
      if (fdatasync(plans[i].fd) != 0) fail(i, errno, "sync " + plans[i].part);
  }
  std::vector<int> dirs;
  for (size_t i = 0; i < plans.size(); ++i) {
    auto& p = plans[i];
    ::close(p.fd);
    p.fd = -1;
    if (out[i].err) continue;
    if (renameat2(p.dir_fd, p.part.c_str(), p.dir_fd, p.final_name.c_str(), RENAME_NOREPLACE) != 0) {
      int err = errno;
      fail(i, err, "rename " + p.part + " to " + p.final_name +
                       (err == EEXIST ? ": a file of that name appeared meanwhile; kept " + p.part : std::string()));
      continue;
    }
    if (!p.record.empty()) unlinkat(p.dir_fd, p.record.c_str(), 0);
    if (std::find(dirs.begin(), dirs.end(), p.dir_fd) == dirs.end()) dirs.push_back(p.dir_fd);
  }
  for (int d : dirs) {
    if (fsync(d) == 0) continue;
    int err = errno;
    for (size_t i = 0; i < plans.size(); ++i)
      if (plans[i].dir_fd == d) fail(i, err, "sync destination directory");
  }
  return out;
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
  release();
}

void PartFile::discard() {
  wait_all();
  drop_runs();
  unlink_quiet(name_ + kPartSuffix);
  drop_record();
  received_.clear();
  written_.clear();
  direct_bytes_ = 0;
  durable_.clear();
  recorded_bytes_ = 0;
  unrecorded_ = unsynced_ = false;
}

void PartFile::unlink_quiet(const std::string& n) { unlinkat(dir_fd_, n.c_str(), 0); }

void PartFile::drop_record() {
  if (has_record_) unlink_quiet(name_ + kProgressSuffix);
  has_record_ = false;
}

}  // namespace xfer
