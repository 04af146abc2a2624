#include "caller.h"

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <linux/openat2.h>
#include <climits>
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

constexpr long kFuseMagic = 0x65735546;  // FUSE_SUPER_MAGIC
constexpr long kProcMagic = 0x9fa0;      // PROC_SUPER_MAGIC

// One answer of the child: which request, its errno, and (0) a descriptor.
struct ChildAnswer {
  uint32_t index;
  int err;
};

// openat2 without magic links (/proc/PID/fd/N, /proc/self/cwd): a path that
// goes through one names whatever some process holds open, not a place.
int open_no_magic(const char* path, int flags) {
  open_how how{};
  how.flags = uint64_t(flags);
  how.resolve = RESOLVE_NO_MAGICLINKS;
  long fd = syscall(SYS_openat2, AT_FDCWD, path, &how, sizeof how);
  if (fd < 0 && errno == ENOSYS) fd = open(path, flags);  // before Linux 5.6; /proc paths are refused by fstatfs below
  return int(fd);
}

// The child's side: raw system calls only (the parent has threads), nothing
// of the parent's but the socket, the caller's identity, then each request.
[[noreturn]] void child(int sock, const Caller& c, const std::vector<OpenRequest>& requests) {
  if (sock != 3 && dup2(sock, 3) < 0) _exit(2);
  syscall(SYS_close_range, 0u, 2u, 0u);
  syscall(SYS_close_range, 4u, ~0u, 0u);
  int id_err = 0;
  if (syscall(SYS_setgroups, c.groups.size(), c.groups.data()) != 0 || syscall(SYS_setresgid, c.gid, c.gid, c.gid) != 0 ||
      syscall(SYS_setresuid, c.uid, c.uid, c.uid) != 0)
    id_err = errno ? errno : EPERM;
  for (uint32_t i = 0; i < requests.size(); ++i) {
    const OpenRequest& r = requests[i];
    int err = id_err, fd = -1;
    if (!err && r.what == OpenAs::WritableDirectory) {
      fd = open_no_magic(r.path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      if (fd < 0) err = errno;
      else if (faccessat(fd, ".", W_OK | X_OK, 0) != 0) err = errno;
    } else if (!err) {
      fd = open_no_magic(r.path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
      struct stat st;
      if (fd < 0) err = errno;
      else if (fstat(fd, &st) != 0) err = errno;
      else if (!S_ISREG(st.st_mode)) err = EINVAL;
    }
    ChildAnswer a{i, err};
    char cbuf[CMSG_SPACE(sizeof(int))] = {};
    iovec iov{&a, sizeof a};
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
    if (sendmsg(3, &msg, MSG_NOSIGNAL) < 0) _exit(1);
    if (fd >= 0) close(fd);
  }
  _exit(0);
}

const char* noun_of(const OpenRequest& r) { return r.what == OpenAs::WritableDirectory ? "destination" : "file"; }

std::string on_proc(const OpenRequest& r) {
  return std::string(noun_of(r)) + " " + xfer::shown(r.path) +
         " is on /proc, which names what processes hold, not a place; xferd does not use it";
}

// What a failed request says to its caller.
std::string failure(const Caller& c, const OpenRequest& r, int err) {
  const char* noun = noun_of(r);
  std::string shown = xfer::shown(r.path);
  switch (err) {
    case ENOENT: return std::string(noun) + " " + shown + " does not exist";
    case ENOTDIR: return std::string(noun) + " " + shown + " is not a directory";
    case EINVAL: return std::string(noun) + " " + shown + " is not a regular file";
    case ELOOP:
      return std::string(noun) + " " + shown + " goes through a symbolic link loop or a /proc magic link (/proc/PID/fd, "
             "/proc/self/cwd); name the place itself";
    case EACCES:
    case EPERM:
    case EROFS:
      return std::string(noun) + " " + shown + " is not " +
             (r.what == OpenAs::WritableDirectory ? "writable" : "readable") + " by " + c.name + " (" + strerror(err) + ")";
    default: return std::string(noun) + " " + shown + ": " + strerror(err);
  }
}

// "" or why a descriptor the child opened is not for xferd to use.
std::string refused_fs(int fd, const OpenRequest& r) {
  struct statfs sf;
  if (fstatfs(fd, &sf) != 0) return "";
  if (sf.f_type == kProcMagic) return on_proc(r);
  if (sf.f_type == kFuseMagic)
    return std::string(noun_of(r)) + " " + xfer::shown(r.path) +
           " is on a FUSE file system, which a user's process serves; xferd does not use it";
  return "";
}

}  // namespace

struct CallerChecks::Check {
  CallerChecks* owner = nullptr;
  uint64_t id = 0;
  Caller caller;
  std::vector<OpenRequest> requests;
  Done done;
  pid_t pid = -1;
  int pidfd = -1, sock = -1;
  sd_event_source *sock_src = nullptr, *exit_src = nullptr, *timer = nullptr;
  std::vector<int> fds;
  std::vector<int> errs;  // -1: no answer yet
  std::string why;        // set by the timeout or a refusal
  bool answered = false, reaped = false;
  ~Check() {
    sd_event_source_disable_unref(sock_src);
    sd_event_source_disable_unref(exit_src);
    sd_event_source_disable_unref(timer);
    if (sock >= 0) close(sock);
    for (int fd : fds)
      if (fd >= 0) close(fd);
    if (!reaped && pidfd >= 0) {
      syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, nullptr, 0);
      siginfo_t si;
      waitid(P_PIDFD, id_t(pidfd), &si, WEXITED | WNOHANG);  // a child that does not exit at once stays a zombie until xferd exits
    }
    if (pidfd >= 0) close(pidfd);
  }
};

CallerChecks::CallerChecks(sd_event* loop) : loop_(loop) {}
CallerChecks::~CallerChecks() = default;

uint64_t CallerChecks::start(const Caller& c, std::vector<OpenRequest> requests, Done done, std::string* why) {
  for (const OpenRequest& r : requests) {
    const char* noun = noun_of(r);
    if (r.path.empty() || r.path[0] != '/') {
      *why = std::string(noun) + " '" + xfer::shown(r.path) + "' is not an absolute path";
      return 0;
    }
    if (r.path.size() > PATH_MAX) {
      *why = std::string(noun) + " " + xfer::shown(r.path) + " is longer than PATH_MAX (" + std::to_string(PATH_MAX) + ")";
      return 0;
    }
    if (r.path.find('\0') != std::string::npos) {
      *why = std::string(noun) + " " + xfer::shown(r.path) + " holds a NUL byte";
      return 0;
    }
    if (r.path == "/proc" || r.path.rfind("/proc/", 0) == 0) {
      *why = on_proc(r);
      return 0;
    }
  }
  auto k = std::make_unique<Check>();
  k->owner = this;
  k->id = next_++;
  k->caller = c;
  k->requests = std::move(requests);
  k->done = std::move(done);
  k->fds.assign(k->requests.size(), -1);
  k->errs.assign(k->requests.size(), -1);
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv) != 0) {
    *why = std::string("socketpair: ") + strerror(errno);
    return 0;
  }
  pid_t pid = fork();
  if (pid < 0) {
    *why = std::string("fork: ") + strerror(errno);
    close(sv[0]);
    close(sv[1]);
    return 0;
  }
  if (pid == 0) child(sv[1], k->caller, k->requests);
  close(sv[1]);
  k->pid = pid;
  k->sock = sv[0];
  k->pidfd = int(syscall(SYS_pidfd_open, pid, 0));
  int r = k->pidfd < 0 ? -errno : 0;
  if (r >= 0) r = sd_event_add_io(loop_, &k->sock_src, k->sock, EPOLLIN, on_socket, k.get());
  if (r >= 0) r = sd_event_add_io(loop_, &k->exit_src, k->pidfd, EPOLLIN, on_exit, k.get());
  if (r >= 0)
    r = sd_event_add_time_relative(loop_, &k->timer, CLOCK_MONOTONIC, uint64_t(kCheckTimeoutMs) * 1000, 0, on_timeout,
                                   k.get());
  if (r < 0) {
    kill(pid, SIGKILL);
    if (k->pidfd < 0) waitpid(pid, nullptr, 0);  // no pidfd: killed, reaped at once
    *why = std::string("watching the check's child: ") + strerror(-r);
    return 0;  // ~Check kills and reaps
  }
  uint64_t id = k->id;
  checks_[id] = std::move(k);
  return id;
}

int CallerChecks::on_socket(sd_event_source*, int, uint32_t revents, void* ud) {
  auto* k = static_cast<Check*>(ud);
  if (read_answers(k, revents & (EPOLLHUP | EPOLLERR))) k->owner->answer(*k);
  return 0;
}

bool CallerChecks::read_answers(Check* k, bool hup) {
  while (true) {
    ChildAnswer a{};
    char cbuf[CMSG_SPACE(sizeof(int))] = {};
    iovec iov{&a, sizeof a};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cbuf;
    msg.msg_controllen = sizeof cbuf;
    ssize_t n = recvmsg(k->sock, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN && !hup) return false;  // more to come
    if (n <= 0) break;  // the child is gone (or broke off): what has not come is an error
    int fd = -1;
    for (cmsghdr* cm = CMSG_FIRSTHDR(&msg); cm; cm = CMSG_NXTHDR(&msg, cm))
      if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) std::memcpy(&fd, CMSG_DATA(cm), sizeof(int));
    if (n != ssize_t(sizeof a) || a.index >= k->errs.size() || k->errs[a.index] != -1) {
      if (fd >= 0) close(fd);
      break;
    }
    k->errs[a.index] = a.err;
    k->fds[a.index] = a.err == 0 ? fd : -1;
    if (a.err != 0 && fd >= 0) close(fd);
    if (std::find(k->errs.begin(), k->errs.end(), -1) == k->errs.end()) break;  // all answered
  }
  return true;
}

int CallerChecks::on_exit(sd_event_source*, int, uint32_t, void* ud) {
  auto* k = static_cast<Check*>(ud);
  siginfo_t si{};
  if (waitid(P_PIDFD, id_t(k->pidfd), &si, WEXITED | WNOHANG) == 0 && si.si_pid == 0) return 0;  // not yet
  k->reaped = true;
  sd_event_source_set_enabled(k->exit_src, SD_EVENT_OFF);
  // The socket may still hold the child's last answers: read them first
  // (answering forgets the check, which is reaped now).
  if (!k->answered) return on_socket(nullptr, k->sock, EPOLLHUP, k);
  k->owner->forget_if_done(k->id);  // frees k
  return 0;
}

int CallerChecks::on_timeout(sd_event_source*, uint64_t, void* ud) {
  auto* k = static_cast<Check*>(ud);
  // An answer that came while the loop was busy elsewhere is an answer: a
  // loop held past the timeout makes the timer and the socket pending at
  // once, and the timer may be dispatched first (Trust.MemoryStays
  // BoundedWhateverIsSubmitted, twenty 100k-file Submits beside other
  // tests: "did not answer within 10 s" for a check that had answered).
  if (read_answers(k, false)) {
    k->owner->answer(*k);
    return 0;
  }
  syscall(SYS_pidfd_send_signal, k->pidfd, SIGKILL, nullptr, 0);
  k->why = "the check of " + xfer::shown(k->requests.front().path) + " as " + k->caller.name + " did not answer within " +
           std::to_string(kCheckTimeoutMs / 1000) + " s (a stalled file system, or a stopped check process?)";
  k->owner->answer(*k);
  return 0;
}

void CallerChecks::answer(Check& k) {
  if (k.answered) return;
  k.answered = true;
  sd_event_source_set_enabled(k.sock_src, SD_EVENT_OFF);
  sd_event_source_set_enabled(k.timer, SD_EVENT_OFF);
  // The child has nothing left to do: one its caller stopped on its way out
  // must not stay (a process of the caller's, held by xferd) until SIGCONT.
  if (!k.reaped) syscall(SYS_pidfd_send_signal, k.pidfd, SIGKILL, nullptr, 0);
  std::string why = k.why;
  size_t failed = 0;
  for (size_t i = 0; why.empty() && i < k.requests.size(); ++i) {
    failed = i;
    if (k.errs[i] == -1) why = failure(k.caller, k.requests[i], EIO);
    else if (k.errs[i] != 0) why = failure(k.caller, k.requests[i], k.errs[i]);
    else why = refused_fs(k.fds[i], k.requests[i]);
  }
  std::vector<int> fds(k.requests.size(), -1);
  if (why.empty()) std::swap(fds, k.fds);
  Done done = std::move(k.done);
  uint64_t id = k.id;
  forget_if_done(id);  // may free k
  if (done) done(std::move(fds), why, failed);
}

void CallerChecks::forget_if_done(uint64_t id) {
  auto it = checks_.find(id);
  if (it != checks_.end() && it->second->answered && it->second->reaped) checks_.erase(it);
}

void CallerChecks::cancel(uint64_t id) {
  auto it = checks_.find(id);
  if (it == checks_.end() || it->second->answered) return;
  Check& k = *it->second;
  k.answered = true;
  k.done = nullptr;
  sd_event_source_set_enabled(k.sock_src, SD_EVENT_OFF);
  sd_event_source_set_enabled(k.timer, SD_EVENT_OFF);
  syscall(SYS_pidfd_send_signal, k.pidfd, SIGKILL, nullptr, 0);  // reaped by on_exit
  forget_if_done(id);
}

size_t CallerChecks::pending(uid_t uid) const {
  size_t n = 0;
  for (const auto& [id, k] : checks_)
    if (!k->answered && k->caller.uid == uid) ++n;
  return n;
}

}  // namespace xferd
