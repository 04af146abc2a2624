#include "metrics_http.h"

#include <fmt/format.h>

#include "metrics.h"

namespace xferd {

std::string metrics_http_response(const std::string& head, const std::function<std::string()>& page) {
  auto answer = [](const char* status, const std::string& type, const std::string& body, bool with_body,
                   const char* extra = "") {
    return fmt::format("HTTP/1.1 {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n{}\r\n{}", status,
                       type, body.size(), extra, with_body ? body : std::string());
  };
  size_t eol = head.find_first_of("\r\n");
  std::string line = head.substr(0, eol);
  size_t sp1 = line.find(' '), sp2 = sp1 == std::string::npos ? sp1 : line.find(' ', sp1 + 1);
  // A HEAD never gets a body, not even with a malformed request line: its
  // client reads no body, and one sent would be taken for the next answer.
  std::string method = line.substr(0, sp1);
  bool head_only = method == "HEAD";
  if (sp2 == std::string::npos || line.compare(sp2 + 1, 5, "HTTP/") != 0)
    return answer("400 Bad Request", "text/plain", "not an HTTP/1.x request\n", !head_only);
  std::string target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  if (method != "GET" && !head_only)
    return answer("405 Method Not Allowed", "text/plain", "xferd's metrics are read with GET\n", true, "Allow: GET, HEAD\r\n");
  std::string path = target.substr(0, target.find('?'));
  if (path != "/metrics")
    return answer("404 Not Found", "text/plain", "xferd serves its metrics at /metrics\n", !head_only);
  return answer("200 OK", kMetricsContentType, page(), !head_only);
}

size_t metrics_request_end(const std::string& in) {
  size_t end = in.find("\r\n\r\n");
  if (end == std::string::npos) end = in.find("\n\n");
  return end;
}

}  // namespace xferd
