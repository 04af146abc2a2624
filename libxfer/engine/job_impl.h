// The state behind xfer::Job. Private to the engine; split from job.cpp so
// that the scheduler (schedule.cpp), discovery (discovery.cpp) and the job's
// life cycle (job.cpp) each fit in one reading.
#pragma once

#include <curl/curl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "discovery.h"
#include "file_work.h"
#include "rate_limit.h"
#include "request.h"
#include "xfer/engine.h"
#include "xfer/part_file.h"

namespace xfer {

struct Chunk;
struct Channel;

// A descriptor closed with its last owner (work handed to FileWork holds one).
struct UniqueFd {
  explicit UniqueFd(int f) : fd(f) {}
  ~UniqueFd() {
    if (fd >= 0) ::close(fd);
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  int fd;
};

struct FileTask {
  // Checking: a file already at the final name, its sha256 being computed.
  enum class State { Pending, Checking, Active, Done, Failed, Skipped };
  size_t index = 0;
  const ManifestEntry* entry = nullptr;
  std::optional<uint64_t> size;
  std::string origin;     // scheme://host:port, the key into Job::Impl::origins
  bool ranges_ok = true;  // false once the server is seen ignoring Range
  State state = State::Pending;
  std::unique_ptr<PartFile> part;
  int inflight = 0;   // requests of this file in flight
  int failures = 0;   // consecutive failed requests without a byte of progress
  int garbled = 0;    // answers that were not HTTP (see Failure::fresh_connection)
  int source_changes = 0;  // times it started again from zero for another version of its source
  int busy_waits = 0;        // times its .part was found held by another writer (activate)
  uint64_t not_before_us = 0;  // waiting for its name until then
  unsigned gen = 0;   // bumped when queued pieces become invalid (file reset)
  Chunk* chunk = nullptr;
  // The sha256 of the file running off the loop: of the existing final file
  // (Checking) or of the complete .part (Active).
  FileWork::Handle checking;
  // A complete, verified .part on its way to the final name: waiting for the
  // next group commit (Ready) or in the one running off the loop (InBatch).
  enum class Commit { None, Ready, InBatch } commit = Commit::None;
  uint64_t recorded_us = 0;  // when its progress was last recorded (or it was opened)
  // Where its requests go once a redirect that xferd followed itself moved
  // it (a job with credentials, see Job::Impl::redirected); empty: entry->url.
  std::string location, location_origin;
  int redirects = 0;
  const std::string& url() const { return location.empty() ? entry->url : location; }
  const std::string& url_origin() const { return location.empty() ? origin : location_origin; }
};

// Human-readable reason for a failed request and whether it is worth a retry.
struct Failure {
  // Why a retry runs on a new connection rather than one from the pool.
  enum class Fresh { No, NotHttp, Http2Framing };
  std::string reason;
  bool retryable = true;
  Fresh fresh = Fresh::No;
  bool fresh_connection() const { return fresh != Fresh::No; }
};

// The retries made on a fresh connection, by why: reported with the job
// (JobProgress::retried_not_http, retried_http2_framing), so that how often
// libcurl 7.88's HTTP/2 reuse bug fires is seen, not only logged at info.
struct FreshRetries {
  size_t not_http = 0, http2_framing = 0;
  void note(const Failure& f) {
    if (f.fresh == Failure::Fresh::NotHttp) ++not_http;
    if (f.fresh == Failure::Fresh::Http2Framing) ++http2_framing;
  }
};

// A byte range of one file waiting for a connection.
struct Piece {
  FileTask* file = nullptr;
  Range r;
  unsigned gen = 0;
  bool end_known = true;
  uint64_t not_before_us = 0;  // retry backoff
  bool fresh_connection = false;  // the last try read garbage from a reused connection
};

// One TCP connection: a multi handle whose connection pool holds only it.
struct Connection {
  // multi: a new handle, or discovery's with the probe's connection in its
  // pool (see Job::Impl::new_connection).
  Connection(Channel* c, std::unique_ptr<CurlMulti> m, bool h1)
      : owned_multi(std::move(m)), multi(*owned_multi), channel(c), http1(h1) {}
  std::unique_ptr<CurlMulti> owned_multi;
  CurlMulti& multi;
  Channel* channel;
  std::vector<Request*> inflight;
  // On https, a connection no request shares (pp = 1) offers HTTP/1.1 alone
  // in ALPN: HTTP/2's framing costs CPU per byte and gives nothing back when
  // nothing is multiplexed (wan, 2 x 222 MB, one connection: 1.43 s of
  // client CPU over h2c, 0.74 s over HTTP/1.1). Set from pp when the
  // connection is made; reconcile() replaces an idle one whose kind pp no
  // longer matches. http:// origins keep the protocol their probe found.
  bool http1;
  bool tls = false;  // has served an https origin
  bool used = false;  // has carried a request
  std::optional<uint64_t> flow_id;  // its socket in the flow monitor, the last one curl connected
  double rate_Bps = 0;  // body bytes per second of its current or last request (wake-up pacing)
  // The stall watch (Job::Impl::reissue_stalled): bytes it has received
  // (headers and bodies, every request's), what that was when last looked
  // at, and how long it has not moved.
  uint64_t heard = 0, watched_bytes = 0, still_us = 0;
};

struct Channel {
  Chunk* chunk = nullptr;
  std::vector<std::unique_ptr<Connection>> connections;
  std::deque<Piece> queue;  // pieces of the files this channel took
};

struct Chunk {
  size_t index = 0;  // in Job::Impl::chunks
  ChunkPlan plan;
  ChunkParams params;
  std::deque<FileTask*> fresh;   // files no channel has taken yet
  std::deque<Piece> requeued;    // remainders of pre-empted / failed requests
  std::vector<std::unique_ptr<Channel>> channels;
  uint64_t bytes_total = 0, bytes_done = 0, bytes_fetched = 0;
  size_t files_done = 0;
  bool finished = false;
};

struct Origin {
  bool known = false;       // protocol decided
  bool h2 = false;          // HTTP/2 (h2 or h2c): pp streams per connection
  bool prior_knowledge = false;  // h2c with prior knowledge on http://
  bool probing = false;
  bool warned_h1 = false;
  bool told_h1 = false;  // said that pp=1 connections use HTTP/1.1
  // The protocol is fixed beforehand (http:// with --http 1.1): the probe
  // only connects, for the RTT (one round trip, not a HEAD's two).
  bool connect_probe = false;
  FileTask* probe_file = nullptr;
  // Answered an If-Range of the version it has with the whole body: range
  // requests to it go without If-Range from then on (each response's
  // validator is still compared with the file's).
  bool if_range_ignored = false;
};

// A file whose .part another writer holds is tried again this often, this
// far apart, before it fails (Job::Impl::activate).
constexpr int kBusyWaits = 50;
constexpr uint64_t kBusyWaitUs = 100 * 1000;

// A file whose source changed this many times while it was fetched fails.
constexpr int kMaxSourceChanges = 3;



// A commit batch waits for this many files, or this long after its first,
// while requests are in flight (Job::Impl::gather_commit).
constexpr size_t kCommitGatherFiles = 32;
constexpr uint64_t kCommitGatherMs = 100;

// Where the scheduler's GETs go: each to the multi handle of the connection
// it was placed on. The scheduler's unit test (tests/unit/schedule_test.cpp)
// puts a recorder here and checks its decisions with no server.
class Transport {
 public:
  virtual ~Transport() = default;
  virtual void send(CurlMulti& m, Request* r) { m.add(r); }
  virtual void stop(Request* r) { r->multi->remove(r); }  // one not completed
};

struct Job::Impl : RequestOwner {
  Impl(Job* self, Engine& e, Spec spec);
  ~Impl() override;

  // job.cpp: life cycle, checkpoints
  void start();
  bool settle_existing(FileTask& f);
  void settle_checked(FileTask& f, uint64_t have, const std::string& got, std::exception_ptr error);
  void skip_existing(FileTask& f, uint64_t have);
  void begin_transfer();
  void apply(const Params& p);
  void pause(const std::string& reason = "");
  void resume();
  void cancel(bool keep_partial);
  void checkpoint_all(bool sync);
  // What f received so far no longer counts: its .part starts again from
  // byte 0 (a body of unknown length that cannot be resumed by range, a
  // server that ignores Range). Throws IoError from the truncation.
  void reset_file(FileTask* f);
  void fail_file(FileTask* f, const std::string& reason);
  void fatal(const std::string& reason);
  // A failed system call on f's files: the name's problem (NameRefused) fails
  // f; a full destination pauses the job when the options say so; anything
  // else on the destination stops the job.
  void io_failed(FileTask* f, const IoError& e);
  void maybe_finish_file(FileTask* f);
  void finish_checked(FileTask* f, const std::string& got, std::exception_ptr error);
  // Group commit (commit_files): verified files wait in commit_ready while a
  // batch runs; when it ends, the next batch takes all of them.
  std::vector<FileTask*> commit_ready;
  FileWork::Handle commit_batch;
  void queue_commit(FileTask* f);  // a verified file joins the next batch
  void gather_commit();            // starts the next batch now, or when more have joined
  void start_commit();
  void commit_done(const std::vector<FileTask*>& batch, const std::vector<CommitOutcome>& outcomes);
  void maybe_finish_job();
  void finish_job(JobState s);
  void on_request_done(Request* r, CURLcode code) override;
  uint64_t log_job() const override { return log_id; }
  void on_get_done(std::unique_ptr<Request> r, CURLcode code);
  JobProgress progress() const;
  // How https servers are checked (there is no way to turn that off).
  const char* tls_trust() const {
    return spec.opts.ca_pem.empty() ? "certificate verified against the system's CA store"
                                    : "certificate verified against the job's own CA certificates only";
  }

  // schedule.cpp: the Chunk -> Channel -> Connection tree
  void pump();
  void reconcile(Chunk& c);
  std::optional<Piece> take_piece(Channel& ch, uint64_t now);
  uint64_t split_min_bytes() const;
  // For this request (its rate); in the job's tail (nothing queued anywhere)
  // a slow stream's threshold goes down to min_piece_bytes.
  uint64_t split_min_bytes(const Request& r, uint64_t now, bool tail = false) const;
  std::optional<Piece> split_inflight(Channel& ch);
  std::optional<Piece> borrow_piece(Channel& ch, uint64_t now);
  bool nothing_queued() const;  // no chunk has a fresh file, a requeued or a queued piece
  static bool channel_busy(const Channel& ch);  // a request in flight on one of its connections
  void keep_warm(Channel& ch);   // its used, idle connections go to `warm`
  void adopt_warm(Channel& ch);  // its never-used connections are swapped for warm ones
  bool activate(FileTask* f);
  void queue_pieces(Channel& ch, FileTask* f);
  void start_get(Connection& s, const Piece& p);
  void preempt(Request* r, bool requeue);
  void drop_connection(Connection& s, bool requeue);
  void requeue(FileTask* f, Range r, bool end_known, uint64_t delay_us, bool front, bool fresh_connection = false);
  void collapse_to_one_connection(FileTask* f);
  void stop_requests(FileTask* f);  // every request of f stops (what they wrote stays)
  // f starts again from zero: its requests stop and its .part is emptied;
  // false (io_failed told) when the .part could not be.
  bool start_over(FileTask* f);
  // Connections that have received nothing for reissue_after_s (or 40 RTTs):
  // their requests given up, their ranges asked again on new connections
  // (at each record tick).
  void reissue_stalled(uint64_t now);
  // A response of another version of f's source than its bytes (validator.h):
  // they are discarded and f starts again from zero (size: the new version's,
  // when the response said it and the manifest did not fix it); past
  // kMaxSourceChanges f fails.
  void restart_file(FileTask* f, const std::string& why, std::optional<uint64_t> size);
  void arm_retry(uint64_t at_us);
  // Channels and connections leave the tree here; their multi handles are freed
  // from a deferred event, never inside their own callbacks.
  void retire(std::unique_ptr<Channel> ch);
  void retire(std::unique_ptr<Connection> s);
  void retire(std::unique_ptr<CurlMulti> m);
  void retire_all_channels();
  bool connection_has_room(const Connection& s, int pp) const;
  bool multiplexed(const Connection& s, const FileTask& f) const;  // its requests go as HTTP/2 streams

  // request.cpp
  Request* new_request(RequestKind kind, FileTask* f, CurlMulti& multi, bool http1 = false);
  // A GET's receive buffer for a body of `bytes` (when known): libcurl
  // allocates it whole for each transfer, so a small file's request gets a
  // small one (16 KiB, curl's default) rather than the bulk 256 KiB. Under
  // a rate cap it holds a few ms of the rate (release_rate_held says why).
  void size_receive_buffer(Request* r, std::optional<uint64_t> bytes);
  void put_credentials(Request* r, const Credentials& c);
  void put_proxy(Request* r, const Proxy& p);
  // A 3xx answer to a request that follows itself: Follow when the file now
  // goes to the new location (asked again by the caller), Failed when the
  // redirect was refused (the file failed with why), No otherwise.
  enum class Redirected { No, Follow, Failed };
  Redirected redirected(FileTask* f, Request* r);
  // What a 401 or 403 means for this job: the reason's tail (what was sent),
  // and, for an answer to credentials that worked before on that origin (a
  // token that expired mid-job), the job pauses until new ones come.
  std::string refused_auth(FileTask* f, Request* r, long http);
  std::set<std::string> auth_worked;  // origins whose credentials had a 2xx
  // After a request ends: forget an h2c connection that may be gone.
  void note_connection(Request* r, CURLcode code);
  std::unique_ptr<Request> take(Request* r);

  Job* self;  // null in the scheduler's unit test
  Engine& eng;
  Transport curl_transport;
  Transport* transport = &curl_transport;
  Spec spec;
  JobController* controller = nullptr;
  int dir_fd = -1;
  JobState state = JobState::Queued;
  void set_state(JobState s);  // every change goes through here (and to Job::on_state)
  std::string fatal_error;
  std::string pause_reason;
  bool needs_credentials = false;  // paused because credentials that worked were refused (refused_auth)

  std::vector<FileTask> files;
  size_t first_open = 0;  // files before it have ended (maybe_finish_job)
  std::vector<std::unique_ptr<Chunk>> chunks;
  std::map<std::string, Origin> origins;
  std::map<Request*, std::unique_ptr<Request>> requests;

  // Discovery, its probes, its kept connection and the connections it opened
  // ahead (discovery.h): it hands the transfer the RTT and those connections.
  Discovery disc{*this};
  std::unique_ptr<Connection> new_connection(Channel& ch, bool h1);

  StartFacts info;
  Params current;  // the application layer's: cc, p, pp per chunk, rate cap
  std::vector<FailedFile> failed;

  uint64_t start_us = 0, end_us = 0, retry_at_us = 0, last_sync_us = 0;
  uint64_t bytes_fetched = 0, bytes_resumed = 0, bytes_done = 0, bytes_total = 0;
  uint64_t body_reads = 0;
  uint64_t cap_resumes = 0, cap_resumes_cut = 0;  // release_rate_held
  bool in_resume = false;  // inside curl_easy_pause(CONT): write_cb's bytes are the ones libcurl held
  size_t files_done = 0, files_failed = 0, files_skipped = 0;
  size_t source_restarts = 0;   // files started again for a changed source (restart_file)
  size_t files_unvalidated = 0; // resumed files whose version nothing vouches for (no validator, no sha256)
  size_t requests_reissued = 0; // given up by reissue_stalled
  FreshRetries fresh_retries;   // failed requests (and HEADs) retried on a new connection
  uint64_t watched_us = 0;      // reissue_stalled's last tick

  std::vector<std::unique_ptr<Channel>> retired_channels;
  std::vector<std::unique_ptr<Connection>> retired_connections;
  // Idle connections of retired channels, kept open for the channels that
  // start after them (keep_warm, adopt_warm).
  std::vector<std::unique_ptr<Connection>> warm;
  std::vector<std::unique_ptr<CurlMulti>> retired_multis;
  FlowMonitor* flow_monitor = nullptr;
  uint32_t job_id = 0;
  uint64_t log_id = 0;  // the job its log lines concern (Job::set_log_job)
  std::map<uint64_t, size_t> flow_chunk;  // flow id -> chunk index

  // Connections open at once per origin (the arbiter's share of a limit
  // over all jobs; Job::limit_connections). An origin not here: no limit.
  std::map<std::string, int> origin_limit;
  void limit_connections(const std::map<std::string, int>& per_origin);
  std::map<std::string, int> open_connections() const;  // busy connections per limited origin

  // The rate cap (current.rate_cap_bps) over every request at once; the
  // requests paused on it, resumed when it has refilled (rate_limit.h).
  RateLimit limit;
  std::vector<Request*> rate_held;
  size_t release_turn = 0;
  void set_rate_cap(double bps);  // 0: none
  void new_interval();            // Job::new_interval
  void hold_for_rate(Request* r);
  void release_rate_held();
  double held_at_most(const Request* r) const;
  void arm_rate_release();
  // Released requests that their resume ended (write_cb stopped them at
  // their end: release_rate_held), finished from the loop's next turn:
  // a release runs inside apply() too, which must not see requests end
  // and others start half-way through it.
  std::vector<Request*> resume_ended;
  void end_resume_ended();

  EventSource checkpoint_src, retry_src, reap_src, commit_gather_src, rate_src, resume_ended_src;
};

Failure classify(CURLcode code, CURL* easy, const char* errbuf);

// Whether a failure counts against the file's max_retries. A garbled answer
// is most often the tail of another response on a reused connection (a
// server that sent more than its Content-Length, the excess arriving after
// curl put the connection back in its pool). curl closes such a connection
// when it fails, so each garbled failure removes one; the first few are
// free, up to a bound that stops a server that only ever answers garbage.
constexpr int kFreeGarbledRetries = 4;
inline bool counts_as_attempt(FileTask* f, const Failure& why) {
  return !why.fresh_connection() || ++f->garbled > kFreeGarbledRetries;
}

}  // namespace xfer
