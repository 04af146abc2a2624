#include "xfer/safe_open.h"
#include "xfer/faults.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace xfer {

const char* file_kind(mode_t mode) {
  if (S_ISREG(mode)) return "regular file";
  if (S_ISDIR(mode)) return "directory";
  if (S_ISFIFO(mode)) return "FIFO";
  if (S_ISSOCK(mode)) return "socket";
  if (S_ISLNK(mode)) return "symbolic link";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "device node";
  return "special file";
}

int create_owned(int dir_fd, const std::string& name, int flags, const FileOwner& owner) {
  int fd = fault("xfer/io/openat") ? -1 : openat(dir_fd, name.c_str(), flags | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd >= 0 && owner.set() && fchown(fd, owner.uid, owner.gid) != 0) {
    int err = errno;
    ::close(fd);
    unlinkat(dir_fd, name.c_str(), 0);
    errno = err;
    return -1;
  }
  return fd;
}

int open_regular(int dir_fd, const std::string& name, int flags, const FileOwner& owner) {
  int fd = fault("xfer/io/openat") ? -1 : openat(dir_fd, name.c_str(), flags | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) {
    int e = errno;
    switch (e) {
      case ENOENT: return -1;
      case ELOOP: throw NameRefused(e, name + " is a symbolic link; not followed");
      case EISDIR: throw NameRefused(e, name + " is a directory, not a regular file; not touched");
      case ENXIO: throw NameRefused(e, name + " is a socket or a FIFO, not a regular file; not touched");
      case EWOULDBLOCK: throw NameRefused(e, name + " is under another process's lease; not waited for");
      case ETXTBSY: throw NameRefused(e, name + " is a running program; not touched");
      default: throw IoError(e, "open " + name);
    }
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    throw IoError(e, "stat " + name);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw NameRefused(EINVAL, name + " is a " + file_kind(st.st_mode) + ", not a regular file; not touched");
  }
  if (owner.set() && (st.st_uid != owner.uid || st.st_nlink != 1)) {
    ::close(fd);
    throw NameRefused(EPERM, name + (st.st_uid != owner.uid ? " belongs to uid " + std::to_string(st.st_uid) +
                                                                   ", not to the job's owner (uid " +
                                                                   std::to_string(owner.uid) + ")"
                                                             : " has " + std::to_string(st.st_nlink) +
                                                                   " hard links (another name may be another user's)") +
                                   "; not touched");
  }
  int fl = fcntl(fd, F_GETFL);
  if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0) {
    int e = errno;
    ::close(fd);
    throw IoError(e, "fcntl " + name);
  }
  return fd;
}

std::string read_bounded(int fd, size_t max_bytes, const std::string& what) {
  std::string out;
  char buf[16384];
  while (out.size() <= max_bytes) {
    size_t want = std::min(sizeof buf, max_bytes + 1 - out.size());
    ssize_t n = read(fd, buf, want);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw IoError(errno, what);
    if (n == 0) break;
    out.append(buf, size_t(n));
  }
  return out;
}

int make_private_file(const std::string& path, const std::string& noun) {
  int narrowed = 0;
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) {
    std::string p = path + suffix;
    int flags = O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC | (*suffix ? 0 : O_CREAT);
    int fd = open(p.c_str(), flags, 0600);
    if (fd < 0) {
      if (errno == ENOENT && *suffix) continue;
      throw std::runtime_error(noun + " " + p + ": " + (errno == ELOOP ? "a symbolic link" : strerror(errno)));
    }
    struct stat st;
    bool ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
    if (ok && (st.st_mode & 077) != 0) {
      if (fchmod(fd, st.st_mode & 0700) != 0) ok = false;
      else ++narrowed;
    }
    close(fd);
    if (!ok) throw std::runtime_error(noun + " " + p + ": not a regular file whose mode can be set to owner only");
  }
  return narrowed;
}

std::string read_small_file(const std::string& path, size_t max_bytes, const std::string& noun) {
  int fd = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error(path + ": cannot read: " + std::string(strerror(errno)));
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    throw std::runtime_error(path + ": is a " + file_kind(st.st_mode) + ", not a " + noun);
  }
  std::string text;
  try {
    text = read_bounded(fd, max_bytes, path);
  } catch (const IoError& e) {
    close(fd);
    throw std::runtime_error(path + ": cannot read: " + e.code().message());
  }
  close(fd);
  if (text.size() > max_bytes)
    throw std::runtime_error(path + ": larger than " + std::to_string(max_bytes) + " bytes; not a " + noun);
  return text;
}

}  // namespace xfer

namespace xfer {
namespace {

bool trusted_owner(uid_t uid) { return uid == 0 || uid == geteuid(); }

// "" or why a directory or file with this stat may not be trusted.
std::string untrusted_why(const struct stat& st, bool above) {
  if (!trusted_owner(st.st_uid)) return "belongs to uid " + std::to_string(st.st_uid) + ", not to root";
  bool writable = (st.st_mode & (S_IWGRP | S_IWOTH)) != 0;
  if (writable && !(above && S_ISDIR(st.st_mode) && (st.st_mode & S_ISVTX)))
    return std::string("is writable by ") + ((st.st_mode & S_IWOTH) ? "every user" : "its group");
  return "";
}

[[noreturn]] void refuse(const std::string& noun, const std::string& path, const std::string& where,
                         const std::string& why) {
  throw UntrustedPath(noun + " " + path + ": " + (where == path ? "it" : where) + " " + why +
                      "; xferd uses only what root owns and others cannot change (chown root, chmod go-w)");
}

}  // namespace

void require_trusted(const std::string& path, Trusted kind, const std::string& noun) {
  if (path.empty() || path[0] != '/') throw UntrustedPath(noun + " '" + path + "': not an absolute path");
  // Components still to walk, and the directory walked so far.
  std::string rest = path.substr(1), at;
  int links = 0;
  while (true) {
    while (!rest.empty() && rest[0] == '/') rest.erase(0, 1);
    if (rest.empty()) break;
    size_t cut = rest.find('/');
    std::string part = rest.substr(0, cut);
    rest = cut == std::string::npos ? "" : rest.substr(cut);
    if (part == ".") continue;
    if (part == "..") {
      at = at.substr(0, at.rfind('/'));
      continue;
    }
    std::string next = at + "/" + part;
    bool last = rest.find_first_not_of('/') == std::string::npos;
    struct stat st;
    if (lstat(next.c_str(), &st) != 0) {
      if (errno == ENOENT && last) return;  // to be created, in a directory checked above
      refuse(noun, path, next, std::string("cannot be examined (") + strerror(errno) + ")");
    }
    if (S_ISLNK(st.st_mode)) {
      if (last) refuse(noun, path, next, "is a symbolic link");
      if (!trusted_owner(st.st_uid) || ++links > 40)
        refuse(noun, path, next, "is a symbolic link that root does not own");
      char target[4096];
      ssize_t n = readlink(next.c_str(), target, sizeof target - 1);
      if (n < 0) refuse(noun, path, next, std::string("cannot be read (") + strerror(errno) + ")");
      std::string t(target, size_t(n));
      rest = t + rest;
      if (t[0] == '/') at.clear();
      continue;
    }
    std::string why = untrusted_why(st, !last);
    if (!why.empty()) refuse(noun, path, next, why);
    if (!last && !S_ISDIR(st.st_mode)) refuse(noun, path, next, "is not a directory");
    if (last && kind == Trusted::File && !S_ISREG(st.st_mode))
      refuse(noun, path, next, std::string("is a ") + file_kind(st.st_mode) + ", not a regular file");
    if (last && kind == Trusted::Directory && !S_ISDIR(st.st_mode))
      refuse(noun, path, next, std::string("is a ") + file_kind(st.st_mode) + ", not a directory");
    at = next;
  }
}

std::string read_trusted_file(const std::string& path, size_t max_bytes, const std::string& noun) {
  require_trusted(path, Trusted::File, noun);
  int fd = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) throw std::runtime_error(path + ": cannot read: " + std::string(strerror(errno)));
  struct stat st;
  std::string why = fstat(fd, &st) != 0 ? std::string(strerror(errno)) : untrusted_why(st, false);
  if (why.empty() && !S_ISREG(st.st_mode)) why = std::string("is a ") + file_kind(st.st_mode) + ", not a " + noun;
  std::string text;
  try {
    if (why.empty()) text = read_bounded(fd, max_bytes, path);
  } catch (const IoError& e) {
    why = "cannot be read: " + e.code().message();
  }
  close(fd);
  if (!why.empty()) refuse(noun, path, path, why);
  if (text.size() > max_bytes)
    throw std::runtime_error(path + ": larger than " + std::to_string(max_bytes) + " bytes; not a " + noun);
  return text;
}

}  // namespace xfer
