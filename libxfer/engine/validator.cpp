#include "xfer/validator.h"

namespace xfer {
namespace {

constexpr std::string_view kEtag = "etag ", kLastModified = "last-modified ";
constexpr size_t kMaxValidator = 512;

bool usable(std::string_view v) {
  if (v.empty() || v.size() > kMaxValidator) return false;
  for (unsigned char c : v)
    if (c < 0x20 || c == 0x7f) return false;
  return true;
}

}  // namespace

std::string response_validator(std::string_view etag, std::string_view last_modified) {
  // A strong tag is a quoted string (RFC 9110 §8.8.3); W/"..." is weak.
  if (usable(etag) && etag.size() >= 2 && etag.front() == '"' && etag.back() == '"')
    return std::string(kEtag) + std::string(etag);
  if (usable(last_modified)) return std::string(kLastModified) + std::string(last_modified);
  return {};
}

std::string_view if_range_value(std::string_view validator) {
  for (std::string_view prefix : {kEtag, kLastModified})
    if (validator.substr(0, prefix.size()) == prefix) return validator.substr(prefix.size());
  return {};
}

}  // namespace xfer
