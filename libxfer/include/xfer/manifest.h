// The manifest: one file a line, `URL [SIZE] [sha256:HEX]`, fields separated
// by blanks; a `#` at the start of a field begins a comment (inside a field,
// as in a URL's fragment, it is part of the field).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace xfer {

struct ManifestEntry {
  std::string url;
  std::optional<uint64_t> size;  // bytes; found by HEAD when absent
  std::string sha256;            // lower-case hex, empty when not given
  std::string name;              // file name at the destination, from the URL
  int line = 0;                  // 1-based line in the manifest text
};

struct Manifest {
  std::vector<ManifestEntry> entries;
};

// Every problem of a manifest at once, one per line: "FILE:LINE: reason".
class ManifestError : public std::runtime_error {
 public:
  ManifestError(const std::vector<std::string>& problems);
  const std::vector<std::string>& problems() const { return problems_; }

 private:
  std::vector<std::string> problems_;
};

// A manifest built entry by entry (from text, or from a caller's list of
// entries, which are data and never parsed as text), with every check an
// entry gets: URL, sha256, file name, names used twice. Problems are
// collected and thrown together by take().
class ManifestBuilder {
 public:
  explicit ManifestBuilder(std::string_view origin);
  // False (and a problem recorded) when the entry is refused.
  bool add(std::string url, std::optional<uint64_t> size, std::string_view sha256_hex, int line);
  void problem(int line, const std::string& what);
  size_t size() const { return m_.entries.size(); }
  Manifest take();  // throws ManifestError with every problem, or for no entries

 private:
  std::string origin_;
  Manifest m_;
  std::vector<std::string> problems_;
  std::map<std::string, int> name_line_;
};

// One line's fields (the comment dropped).
std::vector<std::string_view> manifest_fields(std::string_view line);
// origin names the manifest in messages (a path, "<stdin>", "<dbus>").
Manifest parse_manifest(std::string_view text, std::string_view origin);
// The manifest as text that parse_manifest() reads back to the same entries.
std::string to_text(const Manifest& m);
Manifest load_manifest(const std::string& path);

// Only http and https, with a host. Returns an empty string when the URL is
// acceptable, else the reason it is not.
std::string check_url(const std::string& url);

// scheme://host:port (port explicit, default filled in): which server a URL
// is fetched from. Empty for an unparsable URL.
std::string url_origin(const std::string& url);
// The origins of a manifest's entries, each once, in the order they first come.
std::vector<std::string> manifest_origins(const Manifest& m);

// The destination file name for a URL: the last path segment, percent-decoded.
// Throws std::invalid_argument when that name is unusable as a plain file name
// in one directory (empty, ".", "..", '/', control bytes, too long, or ending in
// the engine's own suffixes).
std::string file_name_from_url(const std::string& url);

}  // namespace xfer
