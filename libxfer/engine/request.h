// One in-flight HTTP request (a curl easy handle) and the callbacks that
// write its body at the right offsets. Private to the engine.
#pragma once

#include <curl/curl.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace xfer {

struct FileTask;
struct Connection;
struct Request;
class CurlMulti;

class RequestOwner {
 public:
  virtual ~RequestOwner() = default;
  virtual void on_request_done(Request* r, CURLcode code) = 0;
  // The job its log lines concern (log::JobScope), 0: none.
  virtual uint64_t log_job() const { return 0; }
};

enum class RequestKind { Get, Head };

struct Request {
  explicit Request(RequestOwner* o, RequestKind k) : owner(o), kind(k) {}
  ~Request();
  Request(const Request&) = delete;
  Request& operator=(const Request&) = delete;

  CURL* easy = nullptr;
  CurlMulti* multi = nullptr;  // the handle it was added to
  RequestOwner* owner;
  RequestKind kind;
  bool probe = false;  // Head: the per-origin protocol probe
  // Head: connect-only, its socket kept for the transfer (Discovery::take_preconnected);
  // the sockets it opened, which curl does not close.
  bool preconnect = false;
  std::vector<int> held;
  int preconnected_fd = -1;  // Get: the kept socket its connection took (until curl asks for its options)
  bool h2c_reuse = false;  // asked for HTTP/2 expecting an open h2c connection
  // A job with credentials follows redirects itself (FOLLOWLOCATION off):
  // a 3xx answer is not written but followed, or refused, by the job.
  bool follows_itself = false;
  bool redirected = false;       // a 3xx answer's body arrived (read, not written)
  std::string location;          // the last response's Location header (when it follows itself)
  std::string credentials_sent;  // what went with it (Credentials::describe()), "" nothing
  bool auth_deferred = false;    // a HEAD sent without the Digest its origin has (put_credentials)
  curl_slist* headers = nullptr; // its secret headers (wiped and freed with it)
  char errbuf[CURL_ERROR_SIZE] = {0};

  // Get: the byte range [begin, end) of file, body written at pos.
  FileTask* file = nullptr;
  Connection* conn = nullptr;
  bool ranged = false;     // a Range header was sent
  uint64_t req_begin = 0;  // first byte asked for
  uint64_t pos = 0;        // next byte to write
  uint64_t end = 0;        // one past the last byte wanted (may shrink: stolen half)
  bool end_known = true;   // false: size unknown, take the whole body
  uint64_t started_us = 0; // when it was handed to its connection (its rate, for split_inflight)
  bool rate_paused = false; // paused by the job's rate cap (Job::Impl::hold_for_rate)
  long rx_buffer = 0;       // its receive buffer, bytes (Job::Impl::size_receive_buffer): the most libcurl hands at once
  bool asked_under_cap = false;  // sent while the job had a rate cap (its receive buffer sized for it)
  int resume_failed = 0;    // the CURLcode curl_easy_pause returned on its release (release_rate_held)

  // Set by the callbacks; read at completion.
  bool response_checked = false;
  bool stopped_at_end = false;  // we cut the body at `end` on purpose
  bool shortened = false;       // `end` moved before the response's end (split_inflight)
  bool range_ignored = false;   // server answered 200 to a Range with start > 0
  std::string abort_reason;     // our own reason to abort (I/O error, size changed)
  int io_errno = 0;             // the write failed with this errno (abort_reason says where)
  size_t header_bytes = 0;      // response header bytes so far (all responses)
  std::string content_encoding; // of the last response, when the server sent one
  std::string etag, last_modified;  // of the last response (validator.h)
  // Validators (validator.h): the If-Range this request carried ("" none);
  // why its response is of another version of the source than the bytes the
  // file holds (the file starts again from zero), with the size that
  // version has when the response told it; a 200 to an If-Range of the
  // same version (a server that ignores If-Range: asked again without it).
  std::string if_range;
  std::string source_changed;
  std::optional<uint64_t> changed_size;
  bool if_range_ignored = false;

  // Parsed response headers (of the last response, after redirects).
  std::optional<uint64_t> cr_start, cr_total;  // Content-Range
  bool accept_ranges = false;
  long http_version = 0;

  // Wake-up pacing (SO_RCVLOWAT) of an HTTP/1.1 body: see pace_wakeups().
  bool paced = false;          // this response's socket is paced
  bool paced_tls = false;      // ...and carries TLS records
  int fd = -1;                 // the socket curl last watched for this request (CurlMulti::socket_cb)
  int lowat = 1;               // the socket's SO_RCVLOWAT as last set
  uint64_t first_byte_us = 0;  // coarse clock at the first body byte
  uint64_t rated_us = 0;       // when the connection's rate was last updated
};

}  // namespace xfer
