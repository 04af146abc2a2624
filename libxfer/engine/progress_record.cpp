#include "xfer/progress_record.h"
#include "xfer/faults.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <sstream>

namespace xfer {
namespace {

constexpr const char* kRecordMagic = "xferd-progress 2";
// A record this job wrote is a few hundred bytes; one far larger was not
// written by xferd, and parsing it would only cost time.
constexpr size_t kMaxRecordBytes = 1 << 20;
constexpr size_t kMaxRecordRanges = 65536;

RangeSet parse_ranges(std::string_view text) {
  if (std::count(text.begin(), text.end(), ',') >= std::ptrdiff_t(kMaxRecordRanges))
    throw std::invalid_argument("more than " + std::to_string(kMaxRecordRanges) + " ranges");
  return RangeSet::parse(std::string(text));
}

}  // namespace

ProgressRecord parse_progress_record(std::string_view text) {
  if (text.size() > kMaxRecordBytes) throw std::invalid_argument("record larger than " + std::to_string(kMaxRecordBytes) + " bytes");
  ProgressRecord rec;
  bool magic = false, size = false;
  size_t pos = 0;
  for (int lineno = 0; pos < text.size(); ++lineno) {
    size_t nl = text.find('\n', pos);
    std::string_view line = text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    pos = nl == std::string_view::npos ? text.size() : nl + 1;
    if (lineno == 0) {
      magic = line == kRecordMagic;
      if (!magic) throw std::invalid_argument("not a progress record of this version");
      continue;
    }
    auto field = [&](std::string_view key, std::string_view* value) {
      if (line.substr(0, key.size()) != key) return false;
      *value = line.substr(key.size());
      return true;
    };
    std::string_view v;
    if (field("url ", &v)) rec.url = v;
    else if (field("size ", &v)) {
      auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), rec.size);
      if (ec != std::errc() || p != v.data() + v.size()) throw std::invalid_argument("bad size");
      size = true;
    } else if (field("sha256 ", &v)) rec.sha256 = v == "-" ? std::string() : std::string(v);
    else if (field("boot ", &v)) rec.boot = v;
    else if (field("validator ", &v)) rec.validator = v == "-" ? std::string() : std::string(v);
    else if (field("synced ", &v)) rec.synced = parse_ranges(v);
    else if (field("written ", &v)) rec.written = parse_ranges(v);
  }
  if (!magic || !size) throw std::invalid_argument("incomplete progress record");
  return rec;
}

std::string to_text(const ProgressRecord& r) {
  std::ostringstream out;
  out << kRecordMagic << "\nurl " << r.url << "\nsize " << r.size << "\nsha256 " << (r.sha256.empty() ? "-" : r.sha256)
      << "\nboot " << r.boot << "\nvalidator " << (r.validator.empty() ? "-" : r.validator) << "\nsynced " << r.synced.to_string() << "\nwritten " << r.written.to_string() << "\n";
  return out.str();
}

std::string read_progress_record(int dir_fd, const std::string& name, const FileOwner& owner, bool* found) {
  int fd = open_regular(dir_fd, name, O_RDONLY, owner);
  if (found) *found = fd >= 0;
  if (fd < 0) return {};
  std::string s;
  try {
    s = read_bounded(fd, kMaxRecordBytes, name);  // more than the bound: parse_progress_record refuses it
  } catch (const IoError&) {
    s.clear();  // unreadable: no record, the file starts again
  }
  ::close(fd);
  return s;
}

void write_progress_record(int dir_fd, const std::string& name, const std::string& text, const FileOwner& owner,
                           bool sync) {
  std::string tmp = name + ".tmp";
  unlinkat(dir_fd, tmp.c_str(), 0);  // a leftover (or a planted link) is replaced, never written through
  int fd = create_owned(dir_fd, tmp, O_WRONLY, owner);
  if (fd < 0 && errno == EEXIST) throw NameRefused(EEXIST, tmp + " is held by something that is not a file; not touched");
  if (fd < 0) throw IoError(errno, "open " + tmp);
  ssize_t n = fault("xfer/io/write") ? -1 : ::write(fd, text.data(), text.size());
  int err = n == static_cast<ssize_t>(text.size()) ? 0 : (n < 0 ? errno : ENOSPC);
  if (!err && sync && (fault("xfer/io/fdatasync") || fdatasync(fd) != 0)) err = errno;
  ::close(fd);
  if (!err && (fault("xfer/io/rename") || renameat(dir_fd, tmp.c_str(), dir_fd, name.c_str()) != 0)) err = errno;
  if (!err) return;
  unlinkat(dir_fd, tmp.c_str(), 0);
  if (err == EISDIR || err == ENOTEMPTY || err == EEXIST || err == ENOTDIR)
    throw NameRefused(err, name + " is a directory; not replaced");
  throw IoError(err, "write progress record " + name);
}

}  // namespace xfer
