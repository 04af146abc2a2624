// Creating requests and the libcurl callbacks that check each response and
// write its body at the file offsets it belongs to.
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstring>

#include "job_impl.h"
#include "xfer/log.h"
#include "xfer/text.h"
#include "xfer/validator.h"

namespace xfer {
namespace {

constexpr long kBufferSize = 256 * 1024;

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == '\r' || s.back() == '\n' || s.back() == ' ')) s.remove_suffix(1);
  return s;
}

bool header_is(std::string_view line, const char* name, std::string_view* value) {
  size_t n = strlen(name);
  if (line.size() <= n || line[n] != ':' || strncasecmp(line.data(), name, n) != 0) return false;
  *value = trim(line.substr(n + 1));
  return true;
}

bool parse_u64(std::string_view s, uint64_t* v) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *v);
  return ec == std::errc() && p == s.data() + s.size();
}

size_t header_cb(char* data, size_t size, size_t n, void* ud) {
  auto* r = static_cast<Request*>(ud);
  std::string_view line(data, size * n), v;
  auto* job = static_cast<Job::Impl*>(r->owner);
  r->header_bytes += line.size();
  if (r->conn) r->conn->heard += line.size();
  if (r->header_bytes > job->spec.opts.max_header_bytes) {
    r->abort_reason = "the server sent more than " + std::to_string(job->spec.opts.max_header_bytes) +
                      " bytes of response headers";
    return 0;  // aborts the transfer
  }
  if (line.rfind("HTTP/", 0) == 0) {  // a new response (redirects, 100-continue)
    r->cr_start.reset();
    r->cr_total.reset();
    r->accept_ranges = false;
    r->content_encoding.clear();
    r->location.clear();
    r->etag.clear();
    r->last_modified.clear();
  } else if (r->follows_itself && header_is(line, "location", &v)) {
    r->location = v;
  } else if (header_is(line, "content-encoding", &v)) {
    r->content_encoding = v;
  } else if (header_is(line, "etag", &v)) {
    r->etag = v;
  } else if (header_is(line, "last-modified", &v)) {
    r->last_modified = v;
  } else if (header_is(line, "content-range", &v)) {
    // "bytes FIRST-LAST/TOTAL" (TOTAL may be '*')
    if (v.rfind("bytes ", 0) == 0) {
      v.remove_prefix(6);
      size_t dash = v.find('-'), slash = v.find('/');
      uint64_t a = 0, t = 0;
      if (dash != v.npos && parse_u64(v.substr(0, dash), &a)) r->cr_start = a;
      if (slash != v.npos && parse_u64(v.substr(slash + 1), &t)) r->cr_total = t;
    }
  } else if (header_is(line, "accept-ranges", &v)) {
    r->accept_ranges = strncasecmp(v.data(), "bytes", 5) == 0;
  }
  return size * n;
}

// First body bytes of a GET: is this the response we asked for?
bool check_response(Request* r) {
  r->response_checked = true;
  long code = 0;
  curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &code);
  FileTask* f = r->file;
  const EngineOptions& opts = static_cast<Job::Impl*>(r->owner)->spec.opts;
  if (r->follows_itself && code >= 300 && code < 400) {
    r->redirected = true;  // the job follows it (or refuses it); its body is not the file's
    return true;
  }
  // libcurl is not asked to decode (no Accept-Encoding): an encoded body is
  // not the file's bytes.
  if (!r->content_encoding.empty() && strcasecmp(r->content_encoding.c_str(), "identity") != 0) {
    r->abort_reason = "the server sent the body with Content-Encoding '" + printable(r->content_encoding.substr(0, 64)) +
                      "', which was not asked for; its bytes are not the file's";
    return false;
  }
  if (opts.wake_batch_ms > 0 && r->conn && r->end_known) {
    long v = 0;
    char* scheme = nullptr;
    curl_easy_getinfo(r->easy, CURLINFO_HTTP_VERSION, &v);
    curl_easy_getinfo(r->easy, CURLINFO_SCHEME, &scheme);
    r->paced = v == CURL_HTTP_VERSION_1_1 || v == CURL_HTTP_VERSION_1_0;
    r->paced_tls = scheme && strcasecmp(scheme, "https") == 0;
  }
  uint64_t total = r->cr_total.value_or(0);
  curl_off_t cl0 = -1;
  curl_easy_getinfo(r->easy, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &cl0);
  if (!r->ranged && cl0 > 0) total = static_cast<uint64_t>(cl0);
  if (opts.max_file_bytes && total > opts.max_file_bytes) {
    r->abort_reason = "the server announces " + std::to_string(total) + " bytes, more than the limit of " +
                      std::to_string(opts.max_file_bytes) + " per file";
    return false;
  }
  // Which version of the source this is (validator.h). The file's bytes so
  // far are of the version it keeps: a response of another would splice two
  // versions into one file (a source replaced between a stop and the resume,
  // or while its ranges are fetched in parallel). The first response of a
  // file, or of a file that holds nothing yet and has no other request out,
  // sets it.
  std::string version = response_validator(r->etag, r->last_modified);
  const std::string& kept = f->part->validator();
  if (version != kept) {
    if (kept.empty() || (f->part->received().empty() && f->inflight <= 1)) {
      f->part->set_validator(version);
    } else {
      r->source_changed = version.empty() ? "the server no longer gives the validator it gave (" + printable(kept) + ")"
                                          : "the source changed (" + printable(kept) + ", now " + printable(version) + ")";
      if (r->cr_total) r->changed_size = r->cr_total;
      else if (code == 200 && cl0 >= 0) r->changed_size = uint64_t(cl0);
      return false;
    }
  }
  // A size the server gave before (the manifest gave none) that it now says
  // otherwise is another version too, whatever its validator says.
  auto size_changed = [&](uint64_t now) {
    if (f->entry->size) {
      r->abort_reason = "file size on the server (" + std::to_string(now) + ") differs from the expected " +
                        std::to_string(*f->size);
    } else {
      r->source_changed = "its size on the server changed from " + std::to_string(*f->size) + " to " + std::to_string(now);
      r->changed_size = now;
    }
    return false;
  };
  if (r->ranged) {
    if (code == 206) {
      if (!r->cr_start || *r->cr_start != r->req_begin) {
        r->abort_reason = "server answered a Range request with another range";
        return false;
      }
      if (r->cr_total && f->size && *r->cr_total != *f->size) return size_changed(*r->cr_total);
      return true;
    }
    if (r->req_begin != 0) {  // 200: the whole body, not our range
      // Of the version asked for (compared above), to an If-Range: a server
      // that ignores If-Range (some CDNs do, for an entity tag) and may honour
      // Range alone; else one that ignores Range.
      if (!r->if_range.empty()) r->if_range_ignored = true;
      else r->range_ignored = true;
      return false;
    }
    // 200 to a range from 0: the body starts where we want; take it up to `end`.
  }
  curl_off_t cl = -1;
  curl_easy_getinfo(r->easy, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &cl);
  if (cl >= 0 && !r->ranged) {
    if (!r->end_known) {
      // The size arrives with the body: from now on the file can be split and resumed.
      f->size = static_cast<uint64_t>(cl);
      f->part->set_size(*f->size);
      r->end = *f->size;
      r->end_known = true;
    } else if (f->size && static_cast<uint64_t>(cl) != *f->size) {
      return size_changed(static_cast<uint64_t>(cl));
    }
  }
  return true;
}

uint64_t coarse_us() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);  // vDSO: no system call
  return uint64_t(ts.tv_sec) * 1000000 + uint64_t(ts.tv_nsec) / 1000;
}

// Wake-up pacing. A socket is readable at its first segment, so a body
// arriving at a few Mbit/s per connection woke the loop (epoll, sd-event,
// curl_multi_socket_action, recv, pwrite) every one or two segments, which
// was most of the engine's cost per byte on small files over a WAN. With
// SO_RCVLOWAT the kernel holds the data until about wake_batch_ms of the
// connection's rate is waiting (it still ACKs at once below the mark, and a
// FIN, an error or a full receive window wakes us regardless).
// The mark never exceeds the bytes still due on the connection, or the last
// bytes would wait for data that never comes: on HTTP/1.1 one response at a
// time uses a connection (the scheduler sends no request behind it), and its
// remaining body (r->end - r->pos, which a stolen range only shortens) is a
// lower bound on what the socket will still receive. Under TLS, OpenSSL may
// already hold part of one record, so that much is taken off. The mark falls
// to 1 with the body's last byte, before the connection carries another
// response; a request that ends early closes its HTTP/1.1 connection.
// HTTP/2 is not paced: its flow-control windows could hold the rest back.
constexpr uint64_t kMaxLowat = kBufferSize / 2;
constexpr uint64_t kTlsSlack = 16 * 1024 + 64;  // one record's plaintext and framing
constexpr uint64_t kRateEveryUs = 100 * 1000;

void pace_wakeups(Request* r, long batch_ms) {
  Connection* c = r->conn;
  uint64_t now = coarse_us();
  if (!r->first_byte_us) {
    r->first_byte_us = r->rated_us = now;
  } else if ((r->pos >= r->end || now - r->rated_us >= kRateEveryUs) && now > r->first_byte_us) {
    // The rate since the first byte, every 100 ms and at the body's end (the
    // next response on this connection starts from it).
    c->rate_Bps = double(r->pos - r->req_begin) * 1e6 / double(now - r->first_byte_us);
    r->rated_us = now;
  }
  uint64_t due = r->end > r->pos ? r->end - r->pos : 0;
  if (r->paced_tls) due = due > kTlsSlack ? due - kTlsSlack : 0;
  uint64_t batch = uint64_t(c->rate_Bps * double(batch_ms) / 1000);
  int want = int(std::clamp<uint64_t>(std::min({due, batch, kMaxLowat}), 1, kMaxLowat));
  // Lower at once when what is due demands it; otherwise move only for a
  // change of more than 2x (each move is a system call).
  if (want == r->lowat || (want > r->lowat / 2 && want < r->lowat * 2 && uint64_t(r->lowat) <= due)) return;
  if (r->fd < 0) return;  // not known (CURLINFO_ACTIVESOCKET answers only after the transfer)
  if (setsockopt(r->fd, SOL_SOCKET, SO_RCVLOWAT, &want, sizeof want) == 0) r->lowat = want;
  else r->paced = false;  // not for this socket: every segment wakes us, as without pacing
}

size_t write_cb(char* data, size_t size, size_t n, void* ud) {
  auto* r = static_cast<Request*>(ud);
  const size_t len = size * n;
  if (r->conn) r->conn->heard += len;  // the server is there (reissue_stalled), whatever becomes of the bytes
  if (!r->response_checked && !check_response(r)) return 0;  // aborts the transfer
  if (r->redirected) {  // a 3xx's body: read and dropped (a short page), never written
    r->pos += len;
    return r->pos - r->req_begin > 64 * 1024 ? 0 : len;
  }
  auto* job = static_cast<Job::Impl*>(r->owner);
  if (job->limit.active() && !job->limit.take(len, coarse_us())) {
    job->cap_resumes_cut += job->in_resume && r->asked_under_cap;
    job->hold_for_rate(r);  // libcurl hands the same bytes again when resumed
    return CURL_WRITEFUNC_PAUSE;
  }
  size_t take = len;
  if (r->end_known) {
    uint64_t room = r->end > r->pos ? r->end - r->pos : 0;
    if (room < take) take = static_cast<size_t>(room);
  } else if (uint64_t most = job->spec.opts.max_file_bytes; most && r->pos + take > most) {
    r->abort_reason = "the body of a file of unknown size passed the limit of " + std::to_string(most) + " bytes per file";
    return 0;
  }
  if (take > 0) {
    try {
      r->file->part->write(r->pos, data, take);
    } catch (const IoError& e) {
      r->abort_reason = e.what();
      r->io_errno = e.code().value() ? e.code().value() : EIO;
      return 0;
    }
    r->pos += take;
    job->bytes_fetched += take;
    ++job->body_reads;
    job->bytes_done += take;
    r->file->chunk->bytes_done += take;
    r->file->chunk->bytes_fetched += take;
    if (r->paced) pace_wakeups(r, job->spec.opts.wake_batch_ms);
  }
  // At its end with more to come (the rest belongs to another stream, or
  // never existed), or exactly at an end a split moved (split_inflight): the
  // server would go on sending what another stream asked for, and the
  // request would wait for bytes it does not need (a stalled connection,
  // its empty rest asked again: HTTP 416 failed the file).
  if (take < len || (r->shortened && r->end_known && r->pos >= r->end)) {
    r->stopped_at_end = true;
    return 0;
  }
  return len;
}

}  // namespace

Request::~Request() {
  if (easy) curl_easy_cleanup(easy);
  for (curl_slist* h = headers; h; h = h->next)
    if (h->data) explicit_bzero(h->data, strlen(h->data));
  curl_slist_free_all(headers);
}

// One origin's credentials on a request. libcurl keeps its own copies of the
// strings set here (freed with the handle; the process is not dumpable); the
// certificate and key are lent (CURL_BLOB_NOCOPY) from their Secret buffers,
// which outlive the request.
void Job::Impl::put_credentials(Request* r, const Credentials& c) {
  CURL* e = r->easy;
  if (!c.bearer.empty()) {
    curl_easy_setopt(e, CURLOPT_HTTPAUTH, CURLAUTH_BEARER);
    curl_easy_setopt(e, CURLOPT_XOAUTH2_BEARER, c.bearer.c_str());
  } else if (!c.sigv4.empty()) {
    curl_easy_setopt(e, CURLOPT_AWS_SIGV4, c.sigv4.c_str());
    curl_easy_setopt(e, CURLOPT_USERNAME, c.user.c_str());
    curl_easy_setopt(e, CURLOPT_PASSWORD, c.password.c_str());
  } else if (c.challenged() && r->kind == RequestKind::Head) {
    // Digest answers a challenge: a HEAD (sizes, the protocol probe) goes
    // without, and a 401 to it only means the size comes with the download.
    // (libcurl 7.88 fails a HEAD's second round on HTTP/2: curl #10634.)
    r->auth_deferred = true;
  } else if (!c.user.empty() || !c.password.empty()) {
    unsigned long kinds = c.auth == AuthKind::Basic    ? CURLAUTH_BASIC
                          : c.auth == AuthKind::Digest ? CURLAUTH_DIGEST
                                                       : CURLAUTH_BASIC | CURLAUTH_DIGEST;  // never NTLM or Negotiate
    curl_easy_setopt(e, CURLOPT_HTTPAUTH, kinds);
    curl_easy_setopt(e, CURLOPT_USERNAME, c.user.c_str());
    curl_easy_setopt(e, CURLOPT_PASSWORD, c.password.c_str());
  }
  for (const auto& [name, value] : c.headers) {
    std::string line = name + ": " + std::string(value.view());
    r->headers = curl_slist_append(r->headers, line.c_str());
    wipe(line);
  }
  if (r->headers) curl_easy_setopt(e, CURLOPT_HTTPHEADER, r->headers);
  if (!c.client_cert.empty()) {
    curl_blob cert{const_cast<char*>(c.client_cert.c_str()), c.client_cert.size(), CURL_BLOB_NOCOPY};
    curl_easy_setopt(e, CURLOPT_SSLCERT_BLOB, &cert);
    curl_easy_setopt(e, CURLOPT_SSLCERTTYPE, "PEM");
    if (!c.client_key.empty()) {
      curl_blob key{const_cast<char*>(c.client_key.c_str()), c.client_key.size(), CURL_BLOB_NOCOPY};
      curl_easy_setopt(e, CURLOPT_SSLKEY_BLOB, &key);
      curl_easy_setopt(e, CURLOPT_SSLKEYTYPE, "PEM");
    }
    // Always set, "" when none: libcurl 7.88 reads a NULL passphrase with
    // strlen when OpenSSL asks for one (an encrypted key without it crashed).
    curl_easy_setopt(e, CURLOPT_KEYPASSWD, c.key_passphrase.c_str());
  }
  if (!r->auth_deferred) r->credentials_sent = c.describe();
}

// The job's proxy, with its own credentials (sent to the proxy only: libcurl
// puts them in Proxy-Authorization, which a tunnel does not pass on).
void Job::Impl::put_proxy(Request* r, const Proxy& p) {
  if (p.url.empty()) return;
  CURL* e = r->easy;
  curl_easy_setopt(e, CURLOPT_PROXY, p.url.c_str());
  if (!p.no_proxy.empty()) curl_easy_setopt(e, CURLOPT_NOPROXY, p.no_proxy.c_str());
  if (!p.user.empty() || !p.password.empty()) {
    curl_easy_setopt(e, CURLOPT_PROXYAUTH, CURLAUTH_BASIC | CURLAUTH_DIGEST);
    curl_easy_setopt(e, CURLOPT_PROXYUSERNAME, p.user.c_str());
    curl_easy_setopt(e, CURLOPT_PROXYPASSWORD, p.password.c_str());
  }
  if (!spec.opts.ca_pem.empty()) {
    curl_blob ca{const_cast<char*>(spec.opts.ca_pem.data()), spec.opts.ca_pem.size(), CURL_BLOB_NOCOPY};
    curl_easy_setopt(e, CURLOPT_PROXY_CAINFO_BLOB, &ca);
  }
}

Request* Job::Impl::new_request(RequestKind kind, FileTask* f, CurlMulti& multi, bool http1) {
  auto owned = std::make_unique<Request>(this, kind);
  Request* r = owned.get();
  CURL* e = curl_easy_init();
  if (!e) throw std::runtime_error("curl_easy_init failed");
  r->easy = e;
  r->file = f;
  const Origin& o = origins.at(f->origin);
  const std::string& url = f->url();
  const bool https = strncasecmp(url.c_str(), "https:", 6) == 0;
  curl_easy_setopt(e, CURLOPT_URL, url.c_str());
  curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
  const JobCredentials* creds = spec.opts.credentials.get();
  const Credentials* mine = creds ? creds->find(f->url_origin()) : nullptr;
  if (creds && !creds->empty()) {
    // Credentials go only where they were given: this job follows its
    // redirects itself (Job::Impl::redirected), one origin at a time.
    r->follows_itself = true;
    curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
    if (mine) put_credentials(r, *mine);
    put_proxy(r, creds->proxy);
  } else {
    // No secrets to keep: libcurl follows, only to http(s), and an https URL
    // only to https unless the job allows the downgrade.
    bool down = spec.opts.credentials && spec.opts.credentials->allow_downgrade;
    curl_easy_setopt(e, CURLOPT_REDIR_PROTOCOLS_STR, https && !down ? "https" : "http,https");
    curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(e, CURLOPT_MAXREDIRS, 10L);
  }
  curl_easy_setopt(e, CURLOPT_FAILONERROR, 1L);
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e, CURLOPT_ERRORBUFFER, r->errbuf);
  curl_easy_setopt(e, CURLOPT_USERAGENT, spec.opts.user_agent.c_str());
  curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, spec.opts.connect_timeout_ms);
  curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, spec.opts.stall_timeout_s);
  curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, &header_cb);
  curl_easy_setopt(e, CURLOPT_HEADERDATA, r);
  curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
  // https: the peer is always verified (there is no option to turn that
  // off), against the job's own CA certificates when it has some.
  curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 1L);
  curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 2L);
  if (!spec.opts.ca_pem.empty()) {
    curl_blob ca{const_cast<char*>(spec.opts.ca_pem.data()), spec.opts.ca_pem.size(), CURL_BLOB_NOCOPY};
    curl_easy_setopt(e, CURLOPT_CAINFO_BLOB, &ca);  // replaces the CA bundle file...
    curl_easy_setopt(e, CURLOPT_CAPATH, nullptr);   // ...and the hashed directory: only these CAs
  }
  curl_easy_setopt(e, CURLOPT_PIPEWAIT, 1L);
  static const bool verbose = getenv("XFER_CURL_VERBOSE") != nullptr;
  if (verbose) curl_easy_setopt(e, CURLOPT_VERBOSE, 1L);
  const bool challenge = mine && mine->challenged();
  long version = http1 || challenge ? CURL_HTTP_VERSION_1_1 : CURL_HTTP_VERSION_2TLS;  // https: ALPN decides
  if (!https) {
    version = CURL_HTTP_VERSION_1_1;
    if (o.prior_knowledge && f->url_origin() == f->origin && !challenge) {
      // See CurlMulti::h2c_open.
      r->h2c_reuse = !multi.h2c_open.insert(f->origin).second;
      version = r->h2c_reuse ? CURL_HTTP_VERSION_2_0 : CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE;
    }
  }
  curl_easy_setopt(e, CURLOPT_HTTP_VERSION, version);
  if (kind == RequestKind::Get && (flow_monitor || disc.preconnect_window)) {
    // Every data connection this job opens is the monitor's to follow.
    // Discovery's are not part of the transfer, unless the transfer takes
    // the probe's over (new_connection hands it to the monitor then) or a
    // socket discovery opened ahead (Discovery::take_preconnected): their closing is
    // reported too.
    curl_easy_setopt(e, CURLOPT_SOCKOPTFUNCTION, +[](void* ud, curl_socket_t fd, curlsocktype purpose) {
      auto* req = static_cast<Request*>(ud);
      auto* job = static_cast<Job::Impl*>(req->owner);
      if (purpose != CURLSOCKTYPE_IPCXN) return int(CURL_SOCKOPT_OK);
      if (job->flow_monitor) {
        uint64_t id = job->flow_monitor->own(fd, job->job_id);
        job->flow_chunk[id] = req->file->chunk->index;
        if (req->conn) req->conn->flow_id = id;  // it goes with the connection (adopt_warm)
      }
      if (fd == req->preconnected_fd) {
        req->preconnected_fd = -1;
        return int(CURL_SOCKOPT_ALREADY_CONNECTED);
      }
      return int(CURL_SOCKOPT_OK);
    });
    curl_easy_setopt(e, CURLOPT_SOCKOPTDATA, r);
  }
  if (kind == RequestKind::Get && disc.preconnect_window) {
    curl_easy_setopt(e, CURLOPT_OPENSOCKETFUNCTION, +[](void* ud, curlsocktype purpose, curl_sockaddr* a) {
      auto* req = static_cast<Request*>(ud);
      auto* job = static_cast<Job::Impl*>(req->owner);
      if (purpose == CURLSOCKTYPE_IPCXN) {
        int fd = job->disc.take_preconnected(&a->addr, a->addrlen);
        if (fd >= 0) return curl_socket_t(req->preconnected_fd = fd);
      }
      return curl_socket_t(socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol));
    });
    curl_easy_setopt(e, CURLOPT_OPENSOCKETDATA, r);
  }
  curl_easy_setopt(e, CURLOPT_CLOSESOCKETFUNCTION, &Discovery::close_socket);
  curl_easy_setopt(e, CURLOPT_CLOSESOCKETDATA, this);
  if (kind == RequestKind::Head) {
    curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
  } else {
    size_receive_buffer(r, std::nullopt);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, &write_cb);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, r);
  }
  requests.emplace(r, std::move(owned));
  return r;
}

// Measured: a job of 100,000 files of 100 bytes spent a third of its loop
// in the allocation (and, under ASan, the mapping) of 256 KiB per request.
void Job::Impl::size_receive_buffer(Request* r, std::optional<uint64_t> bytes) {
  constexpr uint64_t kSmallest = 16 * 1024;
  constexpr double kCappedSeconds = 0.005;
  uint64_t size = kBufferSize;
  if (bytes) size = std::clamp<uint64_t>(*bytes, kSmallest, size);
  if (limit.active()) size = std::min(size, std::max(kSmallest, uint64_t(limit.rate() * kCappedSeconds)));
  r->rx_buffer = long(size);
  curl_easy_setopt(r->easy, CURLOPT_BUFFERSIZE, r->rx_buffer);
}

void Job::Impl::note_connection(Request* r, CURLcode code) {
  if (code != CURLE_OK && code != CURLE_HTTP_RETURNED_ERROR && !(code == CURLE_WRITE_ERROR && r->stopped_at_end))
    r->multi->h2c_open.erase(r->file->origin);
}

// The cap holds over every request in flight at once, from now on; lifted,
// the requests it paused go on at once. The bucket reads the one coarse
// clock that the body writes read (write_cb).
void Job::Impl::set_rate_cap(double bps) {
  limit.set_rate(bps > 0 ? bps / 8 : 0, coarse_us());
  if (!limit.active()) return release_rate_held();
  arm_rate_release();
}

// Requests held for the bucket to fill (release_rate_held) keep the credit
// they wait for: dropped, it would hold them back again in each interval.
void Job::Impl::new_interval() {
  double keep = 0;
  for (const Request* r : rate_held) keep = std::max(keep, held_at_most(r));
  limit.new_interval(coarse_us(), keep);
}

// A request the rate cap paused waits with the others for the bucket to
// refill; they are resumed together, in turn from a different one each time
// (the first resumed takes the first bytes).
void Job::Impl::hold_for_rate(Request* r) {
  if (!r->rate_paused) {
    r->rate_paused = true;
    rate_held.push_back(r);
  }
  arm_rate_release();
}

// What libcurl may hold for a paused request: over HTTP/1.1 the rest of one
// delivery, at most its receive buffer; over HTTP/2 all that its stream
// received while paused, at most the rest of its body. Over HTTP/2 a pause
// holds nothing back on the wire in libcurl 7.88: it grants a 32-MB window
// and reads the connection for the other streams, keeping the paused one's
// bytes (under a 48-Mbit/s cap nginx sent four whole images at the link's
// 80 Mbit/s in 0.83 s; the job was handed them over 1.87 s). Asking for a
// bounded range at a time held the server to the cap, but a capped floor
// then held 88% of its intervals on hla-goals' mixed set against 98%
// (bench/results/hla-goals-ab-00f320a: each range's round trip showed as a
// dip), and it was taken out.
//
// At most 10 ms of the cap, though: the bytes a release waits for are
// handed over together, and a wait that straddles the end of a control
// interval moves them into the next look. Waiting for a full bucket (50 ms)
// moved a tenth of a 0.5-s look: a capped floor's looks went 49, 58, 49 on
// hla-goals' mixed set, 73% of them in its band against 100%
// (bench/results/floor-capped-protocols-ab-e5d23b3).
double Job::Impl::held_at_most(const Request* r) const {
  constexpr double kBatchSeconds = 0.01;
  const double rest = r->end_known && r->end > r->pos ? double(r->end - r->pos) : limit.burst();
  const double held = r->conn && multiplexed(*r->conn, *r->file) ? rest : std::min(rest, double(r->rx_buffer));
  return std::min(held, limit.rate() * kBatchSeconds);
}

void Job::Impl::arm_rate_release() {
  if (rate_held.empty()) return;
  double least = held_at_most(rate_held.front());
  for (const Request* r : rate_held) least = std::min(least, held_at_most(r));
  rate_src.arm_at(
      eng.loop(), eng.now_us() + std::max<uint64_t>(1000, limit.wait_us(coarse_us(), least)),
      [](sd_event_source*, uint64_t, void* ud) {
        static_cast<Job::Impl*>(ud)->release_rate_held();
        return 0;
      },
      this, 500);
}

// A request is resumed only when the bucket holds what libcurl may have
// held for it (held_at_most, 10 ms of the cap at most). libcurl hands the
// held bytes over inside curl_easy_pause, and when the bucket runs dry
// part-way it keeps the rest in a new copy (7.88: pausewrite after
// chop_write). Resumed whenever the bucket was merely above zero, a request
// took one 16-KiB write and copied the rest again: a 256-KiB buffer was
// copied 16 times over, and a capped HTTP/2 job spent 45% of its CPU there
// (bench/results/floor-capped-profile-917dd56). Hence, too, a request started under a cap
// gets a buffer of a few ms of the rate (size_receive_buffer): what it
// holds, copied once at a pause, stays small.
void Job::Impl::release_rate_held() {
  std::vector<Request*> batch;
  batch.swap(rate_held);
  if (batch.empty()) return;
  std::rotate(batch.begin(), batch.begin() + long(release_turn++ % batch.size()), batch.end());
  for (Request* r : batch) {
    // A request resumed before it may take the bucket empty and pause again
    // (hold_for_rate): the rest stay held.
    if (!requests.count(r) || !r->rate_paused) continue;
    if (limit.active() && limit.wait_us(coarse_us(), held_at_most(r)) > 0) {
      rate_held.push_back(r);
      continue;
    }
    r->rate_paused = false;
    cap_resumes += r->asked_under_cap;
    // libcurl hands over the bytes it held from inside curl_easy_pause. When
    // write_cb ends the request there (its end reached: a split moved it
    // while it was held), curl_easy_pause returns CURLE_WRITE_ERROR and
    // leaves the transfer unfinished, its socket no longer watched: nothing
    // would end it until reissue_stalled gave it up (a job's last file sat
    // 5 s with every byte it asked for; issue 54). It is ended at the loop's
    // next turn (end_resume_ended), as drain() ends one. (A handle without a
    // connection, which held nothing, is refused as a bad argument: there
    // is nothing to end.)
    in_resume = true;
    CURLcode rc = curl_easy_pause(r->easy, CURLPAUSE_CONT);
    in_resume = false;
    if (rc == CURLE_WRITE_ERROR) {
      r->resume_failed = rc;
      resume_ended.push_back(r);
      sd_event_source_set_enabled(resume_ended_src.s, SD_EVENT_ONESHOT);
    }
  }
  arm_rate_release();
}

void Job::Impl::end_resume_ended() {
  std::vector<Request*> ended;
  ended.swap(resume_ended);
  // (An earlier one's end may have ended it, and a new request taken its address.)
  for (Request* r : ended)
    if (requests.count(r) && r->resume_failed) r->multi->end(r, r->resume_failed);
}

std::unique_ptr<Request> Job::Impl::take(Request* r) {
  auto it = requests.find(r);
  if (r->rate_paused) std::erase(rate_held, r);
  std::unique_ptr<Request> owned = std::move(it->second);
  requests.erase(it);
  return owned;
}

Failure classify(CURLcode code, CURL* easy, const char* errbuf) {
  Failure f;
  if (code == CURLE_HTTP_RETURNED_ERROR) {
    long http = 0;
    curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &http);
    f.reason = "HTTP " + std::to_string(http);
    f.retryable = http >= 500 || http == 408 || http == 429;
    return f;
  }
  f.reason = curl_easy_strerror(code);
  if (errbuf && *errbuf) f.reason += std::string(": ") + errbuf;
  switch (code) {
    case CURLE_UNSUPPORTED_PROTOCOL:
      if (f.reason.find("HTTP/0.9") != std::string::npos) {
        // Bytes that are not an HTTP answer: most often the tail of an earlier,
        // overlong answer on a reused connection. curl closes that connection,
        // so a retry runs on a fresh one.
        f.reason = "the server's answer is not HTTP (" + f.reason + ")";
        f.fresh = Failure::Fresh::NotHttp;
        break;
      }
      f.reason = "redirected where this job may not follow: not http or https, or https to http (" + f.reason + ")";
      f.retryable = false;
      break;
    case CURLE_PEER_FAILED_VERIFICATION:  // the reason is in errbuf: self-signed, expired, host name, issuer
      f.reason = "TLS: the server's certificate was refused (" + std::string(errbuf && *errbuf ? errbuf : "") + ")";
      f.retryable = false;
      break;
    case CURLE_URL_MALFORMAT:
    case CURLE_TOO_MANY_REDIRECTS:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_REMOTE_ACCESS_DENIED:
    case CURLE_FILESIZE_EXCEEDED:
    case CURLE_OUT_OF_MEMORY:
      f.retryable = false;
      break;
    case CURLE_HTTP2:
      // libcurl 7.88 (Debian 12's) can fail a request it puts on a reused
      // HTTP/2 connection of prior knowledge (h2c) so, without sending it
      // (curl/curl#10634, fixed in 8.0.0): a retry from the pool fails the
      // same way. On hla-goals' mixed set a file failed all 7 attempts in 3
      // of 35 runs, nginx logging none of the 6 retries. A retry runs on a
      // fresh connection.
      f.fresh = Failure::Fresh::Http2Framing;
      break;
    default:  // connect, resolve, resets, truncation, timeouts, HTTP/2 stream errors
      break;
  }
  return f;
}

}  // namespace xfer
