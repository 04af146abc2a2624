// libFuzzer: the metrics endpoint's request parser (any local user reaches
// it). Whatever the head, the answer is one HTTP/1.1 response whose
// Content-Length is its body's length (none of the request echoed in it),
// and the page is built only for GET /metrics, which alone gets 200.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "metrics_http.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string in(reinterpret_cast<const char*>(data), size);
  size_t end = xferd::metrics_request_end(in);
  if (end != std::string::npos && end > in.size()) std::abort();
  std::string head = in.substr(0, end);
  int pages = 0;
  const std::string page = "xferd_up 1\n";
  std::string out = xferd::metrics_http_response(head, [&] {
    ++pages;
    return page;
  });
  if (out.rfind("HTTP/1.1 ", 0) != 0 || out.size() < 12) std::abort();
  int status = std::atoi(out.substr(9, 3).c_str());
  if (status < 200 || status > 599) std::abort();
  if ((status == 200) != (pages == 1) || pages > 1) std::abort();
  size_t blank = out.find("\r\n\r\n");
  if (blank == std::string::npos) std::abort();
  std::string headers = out.substr(0, blank), body = out.substr(blank + 4);
  size_t cl = headers.find("Content-Length: ");
  if (cl == std::string::npos) std::abort();
  size_t length = std::strtoull(headers.c_str() + cl + 16, nullptr, 10);
  // A HEAD (the request line's first word, whatever follows it) gets no body.
  std::string first_line = head.substr(0, head.find_first_of("\r\n"));
  bool head_only = first_line.substr(0, first_line.find(' ')) == "HEAD";
  if (!head_only && length != body.size()) std::abort();
  if (head_only && !body.empty()) std::abort();
  if (status == 200 && !head_only && body != page) std::abort();
  // Nothing of the request comes back: a request line longer than every
  // fixed answer is never found in one.
  if (head.size() > 200 && out.find(head) != std::string::npos) std::abort();
  return 0;
}
