#include "xfer/safe_open.h"

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

int open_regular(int dir_fd, const std::string& name, int flags, const FileOwner& owner) {
  int fd = openat(dir_fd, name.c_str(), flags | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
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
