#include "xfer/manifest.h"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>

#include "xfer/part_names.h"
#include "xfer/text.h"

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
  // Any user information at all, "user@", ":password@" or ";options@", is
  // refused: libcurl sends "http://:PW@host/" as Basic auth with an empty
  // user name. Credentials are given apart from the URL (xferctl's
  // --user, --bearer-token-file...), never inside it.
  for (CURLUPart part : {CURLUPART_USER, CURLUPART_PASSWORD, CURLUPART_OPTIONS}) {
    char* out = nullptr;
    CURLUcode got = curl_url_get(u.h, part, &out, 0);
    curl_free(out);
    if (got == CURLUE_OK) return "credentials in URLs are not accepted (give them with the job's credentials)";
  }
  return {};
}

std::string url_origin(const std::string& url) {
  UrlHandle u;
  if (!u.h || curl_url_set(u.h, CURLUPART_URL, url.c_str(), 0) != CURLUE_OK) return {};
  return url_part(u.h, CURLUPART_SCHEME) + "://" + url_part(u.h, CURLUPART_HOST) + ":" +
         url_part(u.h, CURLUPART_PORT, CURLU_DEFAULT_PORT);
}

std::vector<std::string> manifest_origins(const Manifest& m) {
  std::vector<std::string> out;
  for (const ManifestEntry& e : m.entries)
    if (std::string o = url_origin(e.url); std::find(out.begin(), out.end(), o) == out.end()) out.push_back(std::move(o));
  return out;
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
  if (name.size() + part_names::kLongestSuffix > 255)
    throw std::invalid_argument("file name longer than " + std::to_string(255 - part_names::kLongestSuffix) + " bytes");
  if (part_names::is_engine_name(name))
    throw std::invalid_argument("file name '" + name + "' ends in a suffix xferd uses for partial files");
  return name;
}

ManifestBuilder::ManifestBuilder(std::string_view origin) : origin_(origin) {}

void ManifestBuilder::problem(int line, const std::string& what) {
  if (problems_.size() < kMaxProblems)
    problems_.push_back(origin_ + ":" + std::to_string(line) + ": " + what);
  else if (problems_.size() == kMaxProblems)
    problems_.push_back(origin_ + ": more problems not shown");
}

bool ManifestBuilder::add(std::string url, std::optional<uint64_t> size, std::string_view sha256, int line) {
  ManifestEntry e;
  e.line = line;
  e.url = std::move(url);
  e.size = size;
  if (std::string why = check_url(e.url); !why.empty()) {
    problem(line, why + ": " + shown_url(e.url, 200));
    return false;
  }
  if (!sha256.empty()) {
    std::string hex(sha256);
    for (auto& c : hex) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (hex.size() != 64 || hex.find_first_not_of("0123456789abcdef") != std::string::npos) {
      problem(line, "sha256 must be 64 hex digits: '" + printable(sha256.substr(0, 80)) + "'");
      return false;
    }
    e.sha256 = hex;
  }
  try {
    e.name = file_name_from_url(e.url);
  } catch (const std::invalid_argument& ex) {
    problem(line, std::string(ex.what()) + ": " + shown_url(e.url, 200));
    return false;
  }
  auto [it, fresh] = name_line_.emplace(e.name, line);
  if (!fresh) {
    problem(line, "file name '" + printable(e.name) + "' is already used by line " + std::to_string(it->second));
    return false;
  }
  m_.entries.push_back(std::move(e));
  return true;
}

Manifest ManifestBuilder::take() {
  if (!problems_.empty()) throw ManifestError(problems_);
  if (m_.entries.empty()) throw ManifestError({origin_ + ": no entries"});
  name_line_.clear();
  return std::move(m_);
}

std::vector<std::string_view> manifest_fields(std::string_view line) {
  // Fields are separated by blanks; a '#' at the start of a field begins a
  // comment to the end of the line. Inside a field it is part of it (a URL's
  // fragment), so that no URL is cut short.
  std::vector<std::string_view> fields;
  constexpr std::string_view kBlank = " \t\r\v\f";
  for (size_t i = 0; i < line.size();) {
    if (kBlank.find(line[i]) != std::string_view::npos) {
      ++i;
      continue;
    }
    if (line[i] == '#') break;
    size_t e = line.find_first_of(kBlank, i);
    if (e == std::string_view::npos) e = line.size();
    fields.push_back(line.substr(i, e - i));
    i = e;
  }
  return fields;
}

Manifest parse_manifest(std::string_view text, std::string_view origin) {
  ManifestBuilder b(origin);
  int lineno = 0;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t nl = text.find('\n', pos);
    std::string_view line = text.substr(pos, nl == std::string_view::npos ? text.npos : nl - pos);
    pos = nl == std::string_view::npos ? text.size() + 1 : nl + 1;
    ++lineno;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find('\0') != std::string_view::npos) {
      b.problem(lineno, "contains a NUL byte");
      continue;
    }
    std::vector<std::string_view> fields = manifest_fields(line);
    if (fields.empty()) continue;
    if (fields.size() > 3) {
      b.problem(lineno, "expected 'URL [SIZE] [sha256:HEX]', found " + std::to_string(fields.size()) + " fields");
      continue;
    }
    std::optional<uint64_t> size;
    std::string_view sha;
    bool ok = true, has_sha = false;
    for (size_t i = 1; i < fields.size() && ok; ++i) {
      std::string_view f = fields[i];
      if (f.substr(0, 7) == "sha256:") {
        if (has_sha) b.problem(lineno, "sha256 given twice"), ok = false;
        sha = f.substr(7);
        has_sha = true;
        if (sha.empty()) b.problem(lineno, "sha256 must be 64 hex digits: '" + std::string(f) + "'"), ok = false;
      } else {
        uint64_t v = 0;
        auto [p, ec] = std::from_chars(f.data(), f.data() + f.size(), v);
        if (ec != std::errc() || p != f.data() + f.size() || size) {
          b.problem(lineno, size ? "size given twice" : "'" + printable(f.substr(0, 80)) + "' is neither a size in bytes nor sha256:HEX");
          ok = false;
        }
        size = v;
      }
    }
    if (ok) b.add(std::string(fields[0]), size, sha, lineno);
  }
  return b.take();
}

std::string to_text(const Manifest& m) {
  std::string s;
  for (const ManifestEntry& e : m.entries) {
    s += e.url;
    if (e.size) s += " " + std::to_string(*e.size);
    if (!e.sha256.empty()) s += " sha256:" + e.sha256;
    s += "\n";
  }
  return s;
}

Manifest load_manifest(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw ManifestError({path + ": cannot open manifest"});
  std::ostringstream ss;
  ss << f.rdbuf();
  return parse_manifest(ss.str(), path);
}

}  // namespace xfer
