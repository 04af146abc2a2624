#include "xfer/manifest.h"

#include <curl/curl.h>

#include <cctype>
#include <charconv>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>

#include "xfer/part_file.h"

namespace xfer {
namespace {

std::string join_lines(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : "\n") + x;
  return s;
}

struct UrlHandle {
  CURLU* h = curl_url();
  ~UrlHandle() { curl_url_cleanup(h); }
};

std::string url_part(CURLU* h, CURLUPart part, unsigned flags = 0) {
  char* out = nullptr;
  if (curl_url_get(h, part, &out, flags) != CURLUE_OK) return {};
  std::string s(out);
  curl_free(out);
  return s;
}

constexpr size_t kMaxProblems = 50;

}  // namespace

ManifestError::ManifestError(const std::vector<std::string>& problems)
    : std::runtime_error(join_lines(problems)), problems_(problems) {}

std::string check_url(const std::string& url) {
  if (url.size() > 8192) return "URL longer than 8192 bytes";
  for (unsigned char c : url)
    if (c < 0x21 || c == 0x7f) return "URL contains a space or control character";
  UrlHandle u;
  if (!u.h) return "out of memory";
  // No default scheme: a bare "host/path" is an error, not silently http.
  CURLUcode rc = curl_url_set(u.h, CURLUPART_URL, url.c_str(), 0);
  if (rc != CURLUE_OK) return std::string("not a valid URL (") + curl_url_strerror(rc) + ")";
  std::string scheme = url_part(u.h, CURLUPART_SCHEME);
  for (auto& c : scheme) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (scheme != "http" && scheme != "https")
    return "scheme '" + scheme + "' not allowed: only http and https";
  if (url_part(u.h, CURLUPART_HOST).empty()) return "URL has no host";
  if (!url_part(u.h, CURLUPART_USER).empty()) return "credentials in URLs are not accepted";
  return {};
}

std::string url_origin(const std::string& url) {
  UrlHandle u;
  if (!u.h || curl_url_set(u.h, CURLUPART_URL, url.c_str(), 0) != CURLUE_OK) return {};
  return url_part(u.h, CURLUPART_SCHEME) + "://" + url_part(u.h, CURLUPART_HOST) + ":" +
         url_part(u.h, CURLUPART_PORT, CURLU_DEFAULT_PORT);
}

std::string file_name_from_url(const std::string& url) {
  UrlHandle u;
  if (!u.h || curl_url_set(u.h, CURLUPART_URL, url.c_str(), 0) != CURLUE_OK)
    throw std::invalid_argument("not a valid URL");
  std::string path = url_part(u.h, CURLUPART_PATH);  // still percent-encoded
  size_t slash = path.rfind('/');
  std::string seg = slash == std::string::npos ? path : path.substr(slash + 1);
  int len = 0;
  char* dec = curl_easy_unescape(nullptr, seg.c_str(), static_cast<int>(seg.size()), &len);
  if (!dec) throw std::invalid_argument("cannot decode URL path");
  std::string name(dec, static_cast<size_t>(len));
  curl_free(dec);
  if (name.empty()) throw std::invalid_argument("URL path ends in '/': no file name to save under");
  if (name == "." || name == "..") throw std::invalid_argument("file name '" + name + "' not allowed");
  for (unsigned char c : name) {
    if (c == '/' || c == '\\') throw std::invalid_argument("decoded file name contains a path separator");
    if (c < 0x20 || c == 0x7f) throw std::invalid_argument("decoded file name contains a control character");
  }
  if (name.size() + PartFile::kLongestSuffix > 255)
    throw std::invalid_argument("file name longer than " + std::to_string(255 - PartFile::kLongestSuffix) + " bytes");
  if (PartFile::is_engine_name(name))
    throw std::invalid_argument("file name '" + name + "' ends in a suffix xferd uses for partial files");
  return name;
}

Manifest parse_manifest(std::string_view text, std::string_view origin) {
  Manifest m;
  std::vector<std::string> problems;
  std::map<std::string, int> name_line;
  auto problem = [&](int line, const std::string& what) {
    if (problems.size() < kMaxProblems)
      problems.push_back(std::string(origin) + ":" + std::to_string(line) + ": " + what);
    else if (problems.size() == kMaxProblems)
      problems.push_back(std::string(origin) + ": more problems not shown");
  };

  int lineno = 0;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t nl = text.find('\n', pos);
    std::string_view line = text.substr(pos, nl == std::string_view::npos ? text.npos : nl - pos);
    pos = nl == std::string_view::npos ? text.size() + 1 : nl + 1;
    ++lineno;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find('\0') != std::string_view::npos) {
      problem(lineno, "contains a NUL byte");
      continue;
    }
    size_t hash = line.find('#');
    if (hash != std::string_view::npos) line = line.substr(0, hash);

    std::vector<std::string> fields;
    std::istringstream in{std::string(line)};
    for (std::string f; in >> f;) fields.push_back(f);
    if (fields.empty()) continue;
    if (fields.size() > 3) {
      problem(lineno, "expected 'URL [SIZE] [sha256:HEX]', found " + std::to_string(fields.size()) + " fields");
      continue;
    }

    ManifestEntry e;
    e.line = lineno;
    e.url = fields[0];
    if (std::string why = check_url(e.url); !why.empty()) {
      problem(lineno, why + ": " + e.url.substr(0, 200));
      continue;
    }
    bool ok = true;
    for (size_t i = 1; i < fields.size() && ok; ++i) {
      const std::string& f = fields[i];
      if (f.rfind("sha256:", 0) == 0) {
        std::string hex = f.substr(7);
        for (auto& c : hex) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        bool is_hex = hex.size() == 64 && hex.find_first_not_of("0123456789abcdef") == std::string::npos;
        if (!is_hex || !e.sha256.empty()) {
          problem(lineno, is_hex ? "sha256 given twice" : "sha256 must be 64 hex digits: '" + f + "'");
          ok = false;
        }
        e.sha256 = hex;
      } else {
        uint64_t v = 0;
        auto [p, ec] = std::from_chars(f.data(), f.data() + f.size(), v);
        if (ec != std::errc() || p != f.data() + f.size() || e.size) {
          problem(lineno, e.size ? "size given twice" : "'" + f + "' is neither a size in bytes nor sha256:HEX");
          ok = false;
        }
        e.size = v;
      }
    }
    if (!ok) continue;
    try {
      e.name = file_name_from_url(e.url);
    } catch (const std::invalid_argument& ex) {
      problem(lineno, std::string(ex.what()) + ": " + e.url.substr(0, 200));
      continue;
    }
    auto [it, fresh] = name_line.emplace(e.name, lineno);
    if (!fresh) {
      problem(lineno, "file name '" + e.name + "' is already used by line " + std::to_string(it->second));
      continue;
    }
    m.entries.push_back(std::move(e));
  }
  if (!problems.empty()) throw ManifestError(problems);
  if (m.entries.empty()) throw ManifestError({std::string(origin) + ": no entries"});
  return m;
}

Manifest load_manifest(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw ManifestError({path + ": cannot open manifest"});
  std::ostringstream ss;
  ss << f.rdbuf();
  return parse_manifest(ss.str(), path);
}

}  // namespace xfer
