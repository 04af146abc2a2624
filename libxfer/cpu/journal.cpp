#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "xfer/kernel.h"
#include "xfer/log.h"
#include "xfer/nesting.h"
#include "xfer/safe_open.h"
#include "xfer/text.h"
#include "xfer/safe_open.h"

namespace xfer {
namespace {

std::optional<std::string> read_file(const std::string& p) {
  std::ifstream f(p);
  if (!f) return std::nullopt;
  std::string s((std::istreambuf_iterator<char>(f)), {});
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

bool write_file(const std::string& p, const std::string& v, std::string* err) {
  int fd = open(p.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) {
    *err = strerror(errno);
    return false;
  }
  bool ok = ::write(fd, v.data(), v.size()) == ssize_t(v.size());
  if (!ok) *err = strerror(errno);
  close(fd);
  return ok;
}

// A journalled knob: a file below knob_root, named without "." or ".."
// components, holding a short one-line value.
bool is_knob(const std::string& root, const std::string& p, const std::string& v) {
  std::string prefix = root + "/";
  if (p.compare(0, prefix.size(), prefix) != 0 || p.size() > 512 || v.size() > 256) return false;
  if (p.find('\0') != std::string::npos || v.find_first_of(std::string("\n\0", 2)) != std::string::npos) return false;
  std::string rel = "/" + p.substr(prefix.size()) + "/";
  return rel.find("/../") == std::string::npos && rel.find("/./") == std::string::npos && rel.find("//") == std::string::npos;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> parse_kernel_journal(std::string_view text, const std::string& file,
                                                                      const std::string& root) {
  std::vector<std::pair<std::string, std::string>> out;
  nlohmann::json j;
  try {
    j = parse_json_bounded(text, file);
  } catch (const NestingError& e) {
    throw KernelStateError(std::string(e.what()) + "; not a kernel state journal, left as it is");
  }
  if (j.is_discarded() || !j.is_object() || !j.contains("entries") || !j["entries"].is_array())
    throw KernelStateError(file + ": not a kernel state journal (xferd's JSON with \"entries\"); left as it is, nothing "
                           "restored: move it away or name another [kernel] state_file");
  for (const auto& e : j["entries"]) {
    if (!e.is_array() || e.size() != 2 || !e[0].is_string() || !e[1].is_string()) {
      log::error("{}: an entry that is not [path, value]: {}; skipped", file, shown(e.dump(), 200));
      continue;
    }
    std::string p = e[0].get<std::string>(), v = e[1].get<std::string>();
    if (!is_knob(root, p, v)) {
      log::error("{}: entry {} is not a CPU knob under {}/; not written", file, shown(p, 200), root);
      continue;
    }
    out.emplace_back(p, v);
  }
  return out;
}

namespace {

// The entries of a journal; none when there is no file. Throws
// KernelStateError when the file is there but is not a journal.
std::vector<std::pair<std::string, std::string>> load(const std::string& file, const std::string& root) {
  struct stat st;
  if (lstat(file.c_str(), &st) != 0 && errno == ENOENT) return {};
  std::string text;
  try {
    text = read_trusted_file(file, 1 << 20, "kernel state file");
  } catch (const std::runtime_error& e) {
    throw KernelStateError(std::string(e.what()) + "; nothing restored from it, nothing written");
  }
  return parse_kernel_journal(text, file, root);
}

// Writes every original back; failures get a second pass (ordering between
// min and max limits, governors before their setspeed).
std::vector<std::string> write_back(const std::vector<std::pair<std::string, std::string>>& entries) {
  std::vector<std::pair<std::string, std::string>> retry;
  std::string err;
  for (const auto& [p, v] : entries)
    if (!write_file(p, v, &err)) retry.push_back({p, v});
  std::vector<std::string> failed;
  for (const auto& [p, v] : retry)
    if (!write_file(p, v, &err)) {
      log::error("could not restore {} to '{}': {}", p, v, err);
      failed.push_back(p);
    }
  return failed;
}

}  // namespace

// The lock that says a journal's owner is alive: flock on STATE_FILE.lock,
// released by the kernel when the owner dies however it dies. -1 with
// `holder` set when someone else has it.
int take_lock(const std::string& state_file, std::string* holder) {
  std::string dir = std::filesystem::path(state_file).parent_path();
  std::filesystem::create_directories(dir);
  try {
    require_trusted(dir, Trusted::Directory, "kernel state directory");
  } catch (const UntrustedPath& e) {
    throw KernelStateError(e.what());
  }
  std::string path = state_file + ".lock";
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0600);
  if (fd < 0) throw IoError(errno, "open " + path);
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    char buf[32] = {0};
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    *holder = n > 0 ? std::string(buf, size_t(n)) : "?";
    close(fd);
    return -1;
  }
  std::string me = std::to_string(getpid());
  if (ftruncate(fd, 0) == 0 && pwrite(fd, me.data(), me.size(), 0) < 0) {
    // the pid is only informative
  }
  return fd;
}

KernelJournal::KernelJournal(std::string state_file, std::string knob_root)
    : file_(std::move(state_file)), knob_root_(std::move(knob_root)) {
  while (knob_root_.size() > 1 && knob_root_.back() == '/') knob_root_.pop_back();
  std::string holder;
  lock_fd_ = take_lock(file_, &holder);
  if (lock_fd_ < 0)
    throw KernelBusy("the kernel layer is in use by process " + holder + " (" + file_ + ".lock)");
  std::vector<std::pair<std::string, std::string>> entries;
  try {
    entries = load(file_, knob_root_);
  } catch (...) {
    close(lock_fd_);
    throw;
  }
  if (!entries.empty()) {
    log::warn("{}: a previous run left the kernel changed (crash?); restoring {} values", file_, entries.size());
    // What could not be written back stays journalled: tried again on exit.
    std::vector<std::string> failed = write_back(entries);
    for (const auto& e : entries)
      if (std::find(failed.begin(), failed.end(), e.first) != failed.end()) entries_.push_back(e);
  }
  if (entries_.empty()) unlink(file_.c_str());  // a journal (load() said so), now restored
  else save();
}

KernelJournal::~KernelJournal() {
  restore();
  if (lock_fd_ >= 0) close(lock_fd_);  // releases the lock
}

void KernelJournal::record(const std::string& abs_path) {
  for (const auto& e : entries_)
    if (e.first == abs_path) return;
  auto v = read_file(abs_path);
  if (!v) throw IoError(errno ? errno : ENOENT, "read " + abs_path);
  if (!is_knob(knob_root_, abs_path, *v))
    throw KernelStateError(abs_path + " is not a CPU knob under " + knob_root_ + "/; the kernel layer does not change it");
  // Values the kernel reports but never accepts back stay out of the journal.
  if (*v == "<unsupported>") return;
  entries_.emplace_back(abs_path, *v);
  save();
}

void KernelJournal::save() {
  std::filesystem::create_directories(std::filesystem::path(file_).parent_path());
  nlohmann::json j;
  j["pid"] = getpid();
  j["entries"] = nlohmann::json::array();
  for (const auto& [p, v] : entries_) j["entries"].push_back({p, v});
  std::string tmp = file_ + ".tmp", text = j.dump(2) + "\n";
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0600);
  if (fd < 0) throw IoError(errno, "open " + tmp);
  bool ok = ::write(fd, text.data(), text.size()) == ssize_t(text.size()) && fsync(fd) == 0;
  int err = errno;
  close(fd);
  if (!ok || rename(tmp.c_str(), file_.c_str()) != 0) throw IoError(ok ? errno : err, "write " + file_);
}

std::vector<std::string> KernelJournal::restore() {
  if (entries_.empty()) return {};
  auto failed = write_back(entries_);
  log::info("kernel state restored ({} values{})", entries_.size(),
            failed.empty() ? "" : ", " + std::to_string(failed.size()) + " failed");
  entries_.clear();
  if (failed.empty()) unlink(file_.c_str());
  return failed;
}

bool KernelJournal::restore_leftover(const std::string& state_file, const std::string& knob_root) {
  bool had = !load(state_file, knob_root).empty();
  KernelJournal owner(state_file, knob_root);  // takes the lock (or throws KernelBusy), restores, lets go
  return had;
}

}  // namespace xfer
