// Names in a directory that somebody else controls. xferd runs as root and
// writes into callers' directories, where any name it opens may already hold
// a FIFO (open() would block the daemon's only thread), a socket, a device, a
// directory, a symlink to a file elsewhere, a hard link to another user's
// file, or a regular file under a lease (open() would wait for the lease).
// Every such open goes through open_regular(): it never follows a symlink,
// never blocks, and hands back only a regular file of the expected owner.
#pragma once

#include <sys/types.h>

#include <stdexcept>
#include <string>
#include <system_error>

namespace xfer {

// A failed system call on the destination, with the path it concerned.
class IoError : public std::system_error {
 public:
  IoError(int err, const std::string& what) : std::system_error(err, std::generic_category(), what) {}
};

// The name holds something that is not this job's to use: that file fails
// with the reason, the job goes on (unlike an IoError on the destination).
class NameRefused : public IoError {
 public:
  using IoError::IoError;
};

// Who the engine's files belong to. The daemon runs as root and writes into
// the caller's directory: every file it creates there is chowned to the
// caller, and an existing file is used only when it is the caller's own
// regular file with a single link.
struct FileOwner {
  uid_t uid = static_cast<uid_t>(-1);
  gid_t gid = static_cast<gid_t>(-1);
  bool set() const { return uid != static_cast<uid_t>(-1); }
};

// Opens NAME in dir_fd with flags (O_RDONLY or O_RDWR) plus O_NOFOLLOW,
// O_NONBLOCK (cleared again once the file is known to be regular), O_NOCTTY
// and O_CLOEXEC. Returns the descriptor, or -1 with errno ENOENT when the
// name does not exist. Throws NameRefused when the name is a symlink, not a
// regular file, held by a lease, or (owner set) not the owner's single-link
// file; IoError for any other failure.
int open_regular(int dir_fd, const std::string& name, int flags, const FileOwner& owner = {});

// Creates NAME in dir_fd (O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode
// 0644, plus flags), owned by owner when it is set: the name must not
// exist. Returns the descriptor, or -1 with errno (EEXIST: the name is
// taken; a failed chown removes the new file).
int create_owned(int dir_fd, const std::string& name, int flags, const FileOwner& owner = {});

// What a stat mode is, in words ("FIFO", "directory", ...).
const char* file_kind(mode_t mode);

// Reads fd to its end but no further than max_bytes + 1 bytes: a result
// longer than max_bytes means the file is too large (and was not read
// whole). A read error throws IoError naming `what`.
std::string read_bounded(int fd, size_t max_bytes, const std::string& what);

// The text of a small file an admin names (a configuration file, a power
// model): a regular file (not a directory, nor a FIFO that would block the
// reader) of at most max_bytes. Throws std::runtime_error "PATH: reason",
// calling the file a `noun` ("configuration file") in what it says.
std::string read_small_file(const std::string& path, size_t max_bytes, const std::string& noun);

}  // namespace xfer

namespace xfer {

// What xferd trusts (its state directory, job store, history, kernel journal,
// parameter table, power model, configuration) must be out of other users'
// reach, as sshd's StrictModes asks: the name is not a symbolic link, and it
// and every directory above it belong to root or to this process's user, and
// none is writable by group or others. A directory with the sticky bit (/tmp)
// is allowed above: nobody else can rename or remove what is in it. A
// symbolic link above the name is followed only when root or this user owns it.
class UntrustedPath : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class Trusted { File, Directory };
// Throws UntrustedPath "NOUN PATH: reason; what to do". An absent final name
// passes (what is created there is xferd's own) when its directory does.
void require_trusted(const std::string& path, Trusted kind, const std::string& noun);

// A file only its owner may read (a job store, a history: URLs with their
// query tokens, labels, destinations): created 0600 when absent (never
// through a symlink), and an existing one, with the -wal, -shm and -journal
// files SQLite keeps beside it, taken to 0600 when group or others could read
// it. Returns how many files it narrowed (said by the caller). Throws
// std::runtime_error "NOUN PATH: reason" when the name is not a regular file.
int make_private_file(const std::string& path, const std::string& noun);

// read_small_file() of a file that require_trusted() accepts; the file opened
// is checked again by its descriptor (no symlink, same owner and mode rules).
std::string read_trusted_file(const std::string& path, size_t max_bytes, const std::string& noun);

}  // namespace xfer
