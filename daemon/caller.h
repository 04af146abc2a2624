// Who is asking, from the bus's credentials (never from anything the caller
// says), and what that caller may do on this machine's file system.
#pragma once

#include <sys/types.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace xferd {

struct Caller {
  uid_t uid = static_cast<uid_t>(-1);
  gid_t gid = static_cast<gid_t>(-1);
  std::vector<gid_t> groups;  // supplementary
  std::string name;           // user name, or "uid N" without a passwd entry
  bool root() const { return uid == 0; }
  bool in_group(gid_t g) const;
  // A user name or a numeric uid out of a policy's list.
  bool is(const std::string& user_or_uid) const;
  bool member_of(const std::string& group_or_gid) const;
};

// From the message's sender. Returns a negative errno when the bus will not say.
int caller_of(sd_bus_message* m, Caller* out);
// The same for a uid known from the job store (a restart): passwd and group
// database; only the primary gid stored when there is no passwd entry.
Caller caller_for(uid_t uid, gid_t gid);

// What xferd opens for a caller is opened by a child process that has taken
// the caller's uid, gid and groups: a destination directory the caller may
// create files in (write and search), or a file the caller may read (a CA
// bundle). The descriptors come back over a socket pair, so what the daemon
// uses is what the check was made on, whatever is renamed or re-linked later.
//
// The daemon never waits for a child: CallerChecks watches each one on the
// event loop and answers through a callback, so a caller that stops its own
// child (SIGSTOP), or a path on a stalled file system, costs only that
// caller's request (given up after kCheckTimeoutMs). The child holds no
// descriptor of the daemon's but its socket (close_range), resolves no
// /proc magic link (openat2 RESOLVE_NO_MAGICLINKS), and what it opens on
// procfs or on a FUSE file system (served by some user's process, which
// could stall every write) is refused.
enum class OpenAs { WritableDirectory, ReadableFile };
struct OpenRequest {
  std::string path;
  OpenAs what = OpenAs::WritableDirectory;
};

inline constexpr int kCheckTimeoutMs = 10000;

class CallerChecks {
 public:
  // fds[i] answers requests[i]; on failure every fd is -1, why says which
  // path failed and why, and failed is that request's index. The callee owns
  // the descriptors.
  using Done = std::function<void(std::vector<int> fds, const std::string& why, size_t failed)>;
  explicit CallerChecks(sd_event* loop);
  ~CallerChecks();  // children still running are killed; no callback is called
  CallerChecks(const CallerChecks&) = delete;
  CallerChecks& operator=(const CallerChecks&) = delete;
  // Starts the child; done is called once, later, from the loop. Returns the
  // check's id (never 0), or 0 with *why set when no child could be started.
  uint64_t start(const Caller& c, std::vector<OpenRequest> requests, Done done, std::string* why);
  // Forgets a check: its callback is not called; its child is killed.
  void cancel(uint64_t id);
  // Checks of this uid whose answer has not come yet.
  size_t pending(uid_t uid) const;

 private:
  struct Check;
  // Reads what the child has sent; false while more is to come.
  static bool read_answers(Check* k, bool hup);
  static int on_socket(sd_event_source*, int, uint32_t, void*);
  static int on_exit(sd_event_source*, int, uint32_t, void*);
  static int on_timeout(sd_event_source*, uint64_t, void*);
  void answer(Check& k);
  void forget_if_done(uint64_t id);
  sd_event* loop_;
  uint64_t next_ = 1;
  std::map<uint64_t, std::unique_ptr<Check>> checks_;
};

}  // namespace xferd
