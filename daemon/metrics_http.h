// The metrics endpoint's side of HTTP/1.x (metrics_server.h): what a request
// head gets in answer. Whatever a local user sends is read here, so it is
// fuzzed (tests/fuzz/fuzz_metrics_http.cpp).
#pragma once

#include <cstddef>
#include <functional>
#include <string>

namespace xferd {

// The answer to one request's head (what came before the blank line):
// status line, headers and body. page() is called only for GET /metrics.
std::string metrics_http_response(const std::string& head, const std::function<std::string()>& page);
// Where the head received so far ends (the blank line's offset), or npos
// while it is incomplete.
size_t metrics_request_end(const std::string& in);

}  // namespace xferd
