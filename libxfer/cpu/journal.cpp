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
#include "xfer/part_file.h"

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
  int fd = open(p.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
  if (fd < 0) {
    *err = strerror(errno);
    return false;
  }
  bool ok = ::write(fd, v.data(), v.size()) == ssize_t(v.size());
  if (!ok) *err = strerror(errno);
  close(fd);
  return ok;
}

std::vector<std::pair<std::string, std::string>> load(const std::string& file) {
  std::vector<std::pair<std::string, std::string>> out;
  auto text = read_file(file);
  if (!text) return out;
  auto j = nlohmann::json::parse(*text, nullptr, false);
  if (j.is_discarded() || !j.contains("entries")) {
    log::error("{}: unreadable kernel state file; nothing restored from it", file);
    return out;
  }
  for (const auto& e : j["entries"]) out.emplace_back(e.at(0).get<std::string>(), e.at(1).get<std::string>());
  return out;
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
  std::filesystem::create_directories(std::filesystem::path(state_file).parent_path());
  std::string path = state_file + ".lock";
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
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

KernelJournal::KernelJournal(std::string state_file) : file_(std::move(state_file)) {
  std::string holder;
  lock_fd_ = take_lock(file_, &holder);
  if (lock_fd_ < 0)
    throw KernelBusy("the kernel layer is in use by process " + holder + " (" + file_ + ".lock)");
  auto entries = load(file_);
  if (!entries.empty()) {
    log::warn("{}: a previous run left the kernel changed (crash?); restoring {} values", file_, entries.size());
    // What could not be written back stays journalled: tried again on exit.
    std::vector<std::string> failed = write_back(entries);
    for (const auto& e : entries)
      if (std::find(failed.begin(), failed.end(), e.first) != failed.end()) entries_.push_back(e);
  }
  if (entries_.empty()) unlink(file_.c_str());
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
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
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

bool KernelJournal::restore_leftover(const std::string& state_file) {
  bool had = !load(state_file).empty();
  KernelJournal owner(state_file);  // takes the lock (or throws KernelBusy), restores, lets go
  return had;
}

}  // namespace xfer
