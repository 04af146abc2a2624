// Text that came from a caller (a label, a URL, a policy name, a manifest
// line) is data: wherever it is printed to a terminal or written to a log it
// goes through printable(), so that it can neither move the cursor, change
// colours, retitle a window, nor forge a line of its own.
#pragma once

#include <string>
#include <string_view>

namespace xfer {

// s with every byte or character that a terminal or a line-oriented log
// would act on written as an escape: C0 controls and DEL as \xNN (newline
// \n, tab \t, carriage return \r), C1 controls (U+0080-U+009F) and the
// bidirectional overrides (U+202A-U+202E, U+2066-U+2069) as \u{NNNN}, and
// bytes that are not valid UTF-8 as \xNN. Printable UTF-8 stays as it is.
std::string printable(std::string_view s);

// printable() of at most the first max_bytes of s, and, when s is longer,
// "... (N bytes)": what a caller sent (a path, a policy name, an option key)
// is echoed into replies and logs bounded, however long it was.
std::string shown(std::string_view s, size_t max_bytes = 256);

// A URL as logs, errors and reports show it: user information dropped
// ("https://***@host/..."), every query value hidden ("?token=***", names
// kept when they are short words), the fragment dropped, then shown() to at
// most max_bytes. Works on any text, valid URL or not: a URL refused for
// holding credentials is shown without them too.
std::string shown_url(std::string_view url, size_t max_bytes = 300);

// Whether text holds a PEM certificate (a CA bundle's "-----BEGIN CERTIFICATE-----").
bool has_pem_certificate(std::string_view text);

// s for XML/SVG text: <, > and & as entities.
std::string xml_escape(std::string_view s);

}  // namespace xfer
