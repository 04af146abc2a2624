#include "xfer/sysfs.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

#include "xfer/safe_open.h"

namespace xfer {

bool SysFs::exists(const std::string& rel) const {
  struct stat st;
  return stat(path(rel).c_str(), &st) == 0;
}

std::optional<std::string> SysFs::read(const std::string& rel) const {
  int fd = open(path(rel).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string s;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) s.append(buf, size_t(n));
  close(fd);
  if (n < 0) return std::nullopt;
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

std::optional<long long> SysFs::read_int(const std::string& rel) const {
  auto s = read(rel);
  if (!s || s->empty()) return std::nullopt;
  char* end = nullptr;
  long long v = std::strtoll(s->c_str(), &end, 10);
  if (end == s->c_str()) return std::nullopt;
  return v;
}

void SysFs::write(const std::string& rel, const std::string& value) const {
  std::string p = path(rel);
  int fd = open(p.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
  if (fd < 0) throw IoError(errno, "open " + p);
  ssize_t n = ::write(fd, value.data(), value.size());
  int err = n < 0 ? errno : 0;
  close(fd);
  if (err) throw IoError(err, "write '" + value + "' to " + p);
}

std::vector<std::string> SysFs::list(const std::string& rel) const {
  std::vector<std::string> out;
  DIR* d = opendir(path(rel).c_str());
  if (!d) return out;
  while (dirent* e = readdir(d))
    if (e->d_name[0] != '.') out.push_back(e->d_name);
  closedir(d);
  return out;
}

std::vector<int> parse_cpu_list(const std::string& s) {
  std::vector<int> out;
  size_t pos = 0;
  while (pos < s.size()) {
    size_t comma = s.find(',', pos);
    std::string item = s.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    pos = comma == std::string::npos ? s.size() : comma + 1;
    if (item.empty()) continue;
    size_t dash = item.find('-');
    int a = std::atoi(item.c_str());
    int b = dash == std::string::npos ? a : std::atoi(item.c_str() + dash + 1);
    for (int i = a; i <= b; ++i) out.push_back(i);
  }
  return out;
}

}  // namespace xfer
