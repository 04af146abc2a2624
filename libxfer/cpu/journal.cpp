#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

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

KernelJournal::KernelJournal(std::string state_file) : file_(std::move(state_file)) {
  restore_leftover(file_);
}

KernelJournal::~KernelJournal() { restore(); }

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
  auto entries = load(state_file);
  if (entries.empty()) {
    unlink(state_file.c_str());
    return false;
  }
  log::warn("{}: a previous run left the kernel changed (crash?); restoring {} values", state_file, entries.size());
  if (write_back(entries).empty()) unlink(state_file.c_str());
  return true;
}

}  // namespace xfer
