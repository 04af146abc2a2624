// Who is asking, from the bus's credentials (never from anything the caller
// says), and what that caller may do on this machine's file system.
#pragma once

#include <sys/types.h>
#include <systemd/sd-bus.h>

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

// Opens `path` as a directory in a child process that has taken the caller's
// uid, gid and groups, and checks there that the caller may create files in
// it (write and search). The descriptor comes back over a socket pair, so the
// directory the daemon writes into is the one the check was made on, whatever
// is renamed or re-linked later. Returns the fd, or -1 with *why set.
// The wait for the child is bounded (10 s), and a directory on a FUSE file
// system (served by some user's process, which could stall every write) is
// refused.
int open_dest_as(const Caller& c, const std::string& path, std::string* why);

// The same machinery for a file the caller names (a CA bundle): opened as the
// caller, never blocking, a regular file. What open_dest_as does, generalised.
enum class OpenAs { WritableDirectory, ReadableFile };
int open_as(const Caller& c, const std::string& path, OpenAs what, std::string* why);
// The file's contents, read as the caller; "" with *why set when it cannot be
// read or is larger than max_bytes.
std::string read_file_as(const Caller& c, const std::string& path, size_t max_bytes, std::string* why);

}  // namespace xferd
