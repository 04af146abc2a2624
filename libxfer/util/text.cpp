#include "xfer/text.h"

#include <cstdint>
#include <cstdio>

namespace xfer {
namespace {

// Length of the UTF-8 sequence starting at s[i] and its code point; 0 when
// the bytes there are not a valid, shortest-form sequence.
size_t utf8_sequence(std::string_view s, size_t i, uint32_t* cp) {
  auto b = [&](size_t k) { return static_cast<unsigned char>(s[i + k]); };
  unsigned char c = b(0);
  size_t n = c >= 0xF0 && c <= 0xF4 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 && c < 0xE0 ? 2 : 0;
  if (n == 0 || i + n > s.size()) return 0;
  uint32_t v = c & (n == 2 ? 0x1F : n == 3 ? 0x0F : 0x07);
  for (size_t k = 1; k < n; ++k) {
    if ((b(k) & 0xC0) != 0x80) return 0;
    v = (v << 6) | (b(k) & 0x3F);
  }
  if ((n == 3 && v < 0x800) || (n == 4 && (v < 0x10000 || v > 0x10FFFF)) || (v >= 0xD800 && v <= 0xDFFF)) return 0;
  *cp = v;
  return n;
}

bool acts_on_display(uint32_t cp) {
  return (cp >= 0x80 && cp <= 0x9F) || (cp >= 0x202A && cp <= 0x202E) || (cp >= 0x2066 && cp <= 0x2069);
}

}  // namespace

std::string printable(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  char esc[16];
  for (size_t i = 0; i < s.size();) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7F) {
      out += static_cast<char>(c);
      ++i;
    } else if (c == '\n') {
      out += "\\n", ++i;
    } else if (c == '\t') {
      out += "\\t", ++i;
    } else if (c == '\r') {
      out += "\\r", ++i;
    } else if (c < 0x80) {
      std::snprintf(esc, sizeof esc, "\\x%02x", c);
      out += esc;
      ++i;
    } else {
      uint32_t cp = 0;
      size_t n = utf8_sequence(s, i, &cp);
      if (n == 0) {
        std::snprintf(esc, sizeof esc, "\\x%02x", c);
        out += esc;
        ++i;
      } else if (acts_on_display(cp)) {
        std::snprintf(esc, sizeof esc, "\\u{%04x}", cp);
        out += esc;
        i += n;
      } else {
        out.append(s.substr(i, n));
        i += n;
      }
    }
  }
  return out;
}

std::string xml_escape(std::string_view s) {
  std::string o;
  for (char c : s) {
    if (c == '<') o += "&lt;";
    else if (c == '>') o += "&gt;";
    else if (c == '&') o += "&amp;";
    else o += c;
  }
  return o;
}

std::string shown(std::string_view s, size_t max_bytes) {
  if (s.size() <= max_bytes) return printable(s);
  size_t cut = max_bytes;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;  // not inside a UTF-8 sequence
  return printable(s.substr(0, cut)) + "... (" + std::to_string(s.size()) + " bytes)";
}

std::string shown_url(std::string_view url, size_t max_bytes) {
  std::string out;
  size_t scheme = url.find("://");
  size_t host = scheme == std::string_view::npos ? 0 : scheme + 3;
  size_t auth_end = url.find_first_of("/?#", host);
  if (auth_end == std::string_view::npos) auth_end = url.size();
  size_t at = url.substr(0, auth_end).rfind('@');
  if (at != std::string_view::npos && at >= host) {
    out = std::string(url.substr(0, host)) + "***@";
    url.remove_prefix(at + 1);
  }
  size_t q = url.find_first_of("?#");
  out += url.substr(0, q);
  if (q != std::string_view::npos && url[q] == '?') {
    std::string_view query = url.substr(q + 1);
    query = query.substr(0, query.find('#'));
    out += '?';
    bool first = true;
    while (true) {
      size_t amp = query.find('&');
      std::string_view item = query.substr(0, amp);
      std::string_view name = item.substr(0, item.find('='));
      bool word = !name.empty() && name.size() <= 40 && name.find_first_not_of(
          "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.") == std::string_view::npos;
      if (!first) out += '&';
      first = false;
      if (word && item.size() == name.size()) out += name;  // a bare word: a flag, not a value
      else out += word ? std::string(name) + "=***" : std::string("***");
      if (amp == std::string_view::npos) break;
      query.remove_prefix(amp + 1);
    }
  }
  return shown(out, max_bytes);
}

bool has_pem_certificate(std::string_view text) { return text.find("-----BEGIN CERTIFICATE-----") != std::string_view::npos; }

}  // namespace xfer
