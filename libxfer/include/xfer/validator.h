// Which version of a source a file's bytes are of: HTTP's validators (RFC
// 9110 §8.8, §13.1.5). A strong ETag, else Last-Modified, is kept with the
// bytes (the progress record) from a file's first response on; each later
// range request carries it in If-Range, and each response's is compared with
// it, so bytes of two versions of a source never meet in one file.
#pragma once

#include <string>
#include <string_view>

namespace xfer {

// The validator of a response, as kept: "etag \"x\"" for a strong entity tag,
// else "last-modified DATE", else "" (none: a weak tag "W/..." says only that
// two versions are equivalent, not byte-identical, and If-Range may not carry
// it). A value with control bytes or over 512 bytes is no validator.
std::string response_validator(std::string_view etag, std::string_view last_modified);
// The value an If-Range header carries for a kept validator.
std::string_view if_range_value(std::string_view validator);

}  // namespace xfer
