// A small HTTP/1.1 server that misbehaves on purpose, for the engine's error
// paths. Every path serves the same content (Range supported); the path's
// first segment picks the misbehaviour:
//   /reset-once/...     first GET: headers and half the body, then a TCP RST
//   /truncate-once/...  first GET: headers and half the body, then a clean close
//   /fail-twice/...     first two GETs: 500
//   /norange/...        ignores Range: always 200 and the whole body
// and the hostile ones (issue 12):
//   /overlong/...       sends 4 KiB more than its Content-Length, then closes
//   /overrange/...      answers a Range with 4 KiB more than asked (Content-Range says so)
//   /wrongrange/...     answers a Range with a Content-Range for other bytes
//   /endless/...        no Content-Length: the content again and again
//   /stall/...          half the body on the first GET, none on later ones, then silence on an open connection
//   /stall-once/...     half the body on the first GET, then silence on an open connection; later GETs behave
//   /gzip/...           Content-Encoding: gzip the client did not ask for
//   /bigheaders/...     100 KiB of response headers
//   /loop/...           redirects to itself
//   /trickle/...        the body in 1448-byte writes 1 ms apart (a slow WAN flow), connection kept alive
// Validators (issue 53), when `validators` is set before requests come:
// every response carries ETag "vN", N the content's
// version (replace() makes a new one; a response goes on with the version it
// started with, as a server that keeps the replaced file open), and a GET
// whose If-Range is not the current ETag gets 200 and the whole body, unless:
//   /noetag/...         no validator at all (nor Last-Modified)
//   /weak/...           only a weak ETag W/"vN" (no validator for If-Range)
//   /ignore-if-range/.. answers any If-Range with 200 and the whole body (as some CDNs do for an entity tag)
// and the credential checks (issue 40), each answering 401 (403 for a wrong
// SigV4 signature) unless the request carries what they check:
//   /digest/...         HTTP Digest (MD5, qop=auth) for digest_user / digest_password
//   /sigv4/...          AWS SigV4 (AWS4-HMAC-SHA256) by sigv4_access / sigv4_secret,
//                       recomputed from the request's own SignedHeaders
//   /to/PORT/...        302 to http://127.0.0.1:PORT/... (another origin)
//   anything else       behaves
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace xtest {

class FlakyServer {
 public:
  explicit FlakyServer(std::string content);
  ~FlakyServer();
  // A new version of the content (ETag "v2", "v3", ...). cut: the responses of
  // older versions still being sent are cut off (a TCP RST), as a server
  // restarted onto the new file does; their clients ask again.
  void replace(std::string content, bool cut = false);
  int port = 0;
  std::atomic<uint64_t> body_bytes{0};  // body bytes written to sockets
  std::vector<std::string> requests();  // "METHOD PATH RANGE" in arrival order
  std::vector<std::string> heads();     // each request's whole header block, in arrival order
  std::string digest_user, digest_password, sigv4_access, sigv4_secret;  // set before requests come
  bool validators = false;  // ETag and If-Range (see above); set before requests come
  std::atomic<int> auth_ok{0}, auth_refused{0};

 private:
  void serve(int fd);
  int hits(const std::string& path);  // GETs of path so far, this one included
  // The current version, read by every response without a lock (atomic
  // shared_ptr: a response keeps the version it started with).
  struct Version {
    std::string content;
    int number = 1;
  };
  std::shared_ptr<const Version> current_;
  std::atomic<int> cut_below_{0};  // responses of versions under this stop
  int listen_fd_ = -1;
  std::thread acceptor_;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::map<std::string, int> hits_;
  std::vector<std::string> log_, heads_;
  std::atomic<bool> stop_{false};
};

}  // namespace xtest
