// All sysfs access goes through this class, built with a root path, so tests
// point it at a fake tree (thermal_daemon's habit). Errors name the path.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace xfer {

class SysFs {
 public:
  explicit SysFs(std::string root) : root_(std::move(root)) {}
  const std::string& root() const { return root_; }
  std::string path(const std::string& rel) const { return root_ + "/" + rel; }
  bool exists(const std::string& rel) const;
  // Contents without the trailing newline; nullopt if unreadable.
  std::optional<std::string> read(const std::string& rel) const;
  std::optional<long long> read_int(const std::string& rel) const;
  // Throws IoError naming the path (EBUSY, EINVAL from the kernel, EACCES, ...).
  void write(const std::string& rel, const std::string& value) const;
  // Names of the entries of a directory (empty if none).
  std::vector<std::string> list(const std::string& rel) const;

 private:
  std::string root_;
};

// "0-3,5,7-8" (the kernel's CPU list format) -> {0,1,2,3,5,7,8}.
std::vector<int> parse_cpu_list(const std::string& s);

}  // namespace xfer
