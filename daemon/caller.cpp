#include "caller.h"

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "xfer/safe_open.h"
#include "xfer/text.h"

namespace xferd {

bool Caller::in_group(gid_t g) const {
  return gid == g || std::find(groups.begin(), groups.end(), g) != groups.end();
}

bool Caller::is(const std::string& u) const {
  if (u == name) return true;
  return !u.empty() && u.size() <= 10 && u.find_first_not_of("0123456789") == std::string::npos && std::stoul(u) == uid;
}

bool Caller::member_of(const std::string& g) const {
  if (!g.empty() && g.size() <= 10 && g.find_first_not_of("0123456789") == std::string::npos)
    return in_group(gid_t(std::stoul(g)));
  group gr{}, *res = nullptr;
  char buf[16384];
  if (getgrnam_r(g.c_str(), &gr, buf, sizeof buf, &res) != 0 || !res) return false;
  return in_group(res->gr_gid);
}

namespace {

// Name, and the groups when the bus did not say, from the passwd and group
// databases; c.gid, when unknown (-1), is the passwd entry's primary group, or
// without an entry the first group the bus gave (else the uid).
void fill_name_and_groups(Caller& c, bool groups_known) {
  passwd pw{}, *res = nullptr;
  char buf[16384];
  bool known = getpwuid_r(c.uid, &pw, buf, sizeof buf, &res) == 0 && res;
  if (c.gid == gid_t(-1)) c.gid = known ? res->pw_gid : c.groups.empty() ? gid_t(c.uid) : c.groups.front();
  if (known) {
    c.name = res->pw_name;
    if (!groups_known) {
      int n = 64;
      std::vector<gid_t> g(n);
      if (getgrouplist(res->pw_name, c.gid, g.data(), &n) < 0) {
        g.resize(n);
        getgrouplist(res->pw_name, c.gid, g.data(), &n);
      }
      g.resize(std::max(n, 0));
      c.groups = g;
    }
  } else {
    c.name = "uid " + std::to_string(c.uid);
  }
}

}  // namespace

// The bus driver's word (SO_PEERCRED / SO_PEERGROUPS at connect time), never
// /proc (a pid can be reused): the effective uid, and the groups when the driver knows them.
int caller_of(sd_bus_message* m, Caller* out) {
  sd_bus_creds* creds = nullptr;
  int r = sd_bus_query_sender_creds(m, SD_BUS_CREDS_EUID | SD_BUS_CREDS_SUPPLEMENTARY_GIDS, &creds);
  if (r < 0) return r;
  Caller c;
  r = sd_bus_creds_get_euid(creds, &c.uid);
  const gid_t* gids = nullptr;
  int ng = r >= 0 ? sd_bus_creds_get_supplementary_gids(creds, &gids) : -1;
  if (ng >= 0) c.groups.assign(gids, gids + ng);
  sd_bus_creds_unref(creds);
  if (r < 0) return r;
  fill_name_and_groups(c, ng >= 0);
  *out = c;
  return 0;
}

Caller caller_for(uid_t uid, gid_t gid) {
  Caller c;
  c.uid = uid;
  c.gid = gid;
  fill_name_and_groups(c, false);
  return c;
}

namespace {

constexpr int kChildTimeoutMs = 10000;  // a path that stalls (a hung NFS mount) is given up on
constexpr long kFuseMagic = 0x65735546;  // FUSE_SUPER_MAGIC

}  // namespace

int open_as(const Caller& c, const std::string& path, OpenAs what, std::string* why) {
  const char* noun = what == OpenAs::WritableDirectory ? "destination" : "file";
  if (path.empty() || path[0] != '/') {
    *why = std::string(noun) + " '" + xfer::printable(path) + "' is not an absolute path";
    return -1;
  }
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
    *why = std::string("socketpair: ") + strerror(errno);
    return -1;
  }
  pid_t pid = fork();
  if (pid < 0) {
    *why = std::string("fork: ") + strerror(errno);
    close(sv[0]);
    close(sv[1]);
    return -1;
  }
  if (pid == 0) {
    // The child: raw system calls only (the parent may have threads), the
    // caller's identity, then the check. Its verdict: an errno and, on
    // success, the descriptor.
    close(sv[0]);
    int err = 0;
    if (syscall(SYS_setgroups, c.groups.size(), c.groups.data()) != 0 || syscall(SYS_setresgid, c.gid, c.gid, c.gid) != 0 ||
        syscall(SYS_setresuid, c.uid, c.uid, c.uid) != 0)
      err = errno ? errno : EPERM;
    int fd = -1;
    if (!err && what == OpenAs::WritableDirectory) {
      fd = open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      if (fd < 0) err = errno;
      else if (faccessat(fd, ".", W_OK | X_OK, 0) != 0) err = errno;
    } else if (!err) {
      fd = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
      struct stat st;
      if (fd < 0) err = errno;
      else if (fstat(fd, &st) != 0) err = errno;
      else if (!S_ISREG(st.st_mode)) err = EINVAL;
    }
    char cbuf[CMSG_SPACE(sizeof(int))] = {};
    iovec iov{&err, sizeof err};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    if (!err) {
      msg.msg_control = cbuf;
      msg.msg_controllen = sizeof cbuf;
      cmsghdr* cm = CMSG_FIRSTHDR(&msg);
      cm->cmsg_level = SOL_SOCKET;
      cm->cmsg_type = SCM_RIGHTS;
      cm->cmsg_len = CMSG_LEN(sizeof(int));
      std::memcpy(CMSG_DATA(cm), &fd, sizeof(int));
    }
    _exit(sendmsg(sv[1], &msg, 0) < 0 ? 1 : 0);
  }
  close(sv[1]);
  int err = EIO, fd = -1;
  char cbuf[CMSG_SPACE(sizeof(int))] = {};
  iovec iov{&err, sizeof err};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = cbuf;
  msg.msg_controllen = sizeof cbuf;
  ssize_t n = -1;
  pollfd pfd{sv[0], POLLIN, 0};
  int ready;
  do ready = poll(&pfd, 1, kChildTimeoutMs);
  while (ready < 0 && errno == EINTR);
  bool timed_out = ready == 0;
  if (timed_out) kill(pid, SIGKILL);
  else {
    do n = recvmsg(sv[0], &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
    while (n < 0 && errno == EINTR);
  }
  if (n == ssize_t(sizeof err))
    for (cmsghdr* cm = CMSG_FIRSTHDR(&msg); cm; cm = CMSG_NXTHDR(&msg, cm))
      if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) std::memcpy(&fd, CMSG_DATA(cm), sizeof(int));
  close(sv[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (n != ssize_t(sizeof err)) err = EIO;
  std::string shown = xfer::printable(path);
  if (timed_out) {
    *why = std::string(noun) + " " + shown + " did not answer within " + std::to_string(kChildTimeoutMs / 1000) +
           " s (a stalled file system?)";
    return -1;
  }
  if (err == 0 && fd >= 0 && what == OpenAs::WritableDirectory) {
    // A FUSE file system is served by a process of its owner, who could stall
    // every write of the daemon there: not a destination for xferd.
    struct statfs sf;
    if (fstatfs(fd, &sf) == 0 && sf.f_type == kFuseMagic) {
      close(fd);
      *why = "destination " + shown + " is on a FUSE file system, which a user's process serves; xferd does not write there";
      return -1;
    }
  }
  if (err == 0 && fd >= 0) return fd;
  if (fd >= 0) close(fd);
  switch (err) {
    case ENOENT: *why = std::string(noun) + " " + shown + " does not exist"; break;
    case ENOTDIR: *why = std::string(noun) + " " + shown + " is not a directory"; break;
    case EINVAL: *why = std::string(noun) + " " + shown + " is not a regular file"; break;
    case EACCES:
    case EPERM:
    case EROFS:
      *why = std::string(noun) + " " + shown + " is not " + (what == OpenAs::WritableDirectory ? "writable" : "readable") +
             " by " + c.name + " (" + strerror(err) + ")";
      break;
    default: *why = std::string(noun) + " " + shown + ": " + strerror(err);
  }
  return -1;
}

int open_dest_as(const Caller& c, const std::string& path, std::string* why) {
  return open_as(c, path, OpenAs::WritableDirectory, why);
}

std::string read_file_as(const Caller& c, const std::string& path, size_t max_bytes, std::string* why) {
  int fd = open_as(c, path, OpenAs::ReadableFile, why);
  if (fd < 0) return {};
  std::string out;
  try {
    out = xfer::read_bounded(fd, max_bytes, path);
    if (out.size() > max_bytes) {
      *why = "file " + xfer::printable(path) + " is larger than " + std::to_string(max_bytes) + " bytes";
      out.clear();
    }
  } catch (const xfer::IoError& e) {
    *why = "file " + xfer::printable(path) + ": " + e.code().message();
  }
  close(fd);
  return out;
}

}  // namespace xferd
