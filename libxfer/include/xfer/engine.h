// The transfer engine: one curl_multi per connection driven by an sd-event
// loop through libcurl's socket and timer callbacks (no busy poll), and the
// Job that schedules a dataset over them:
// Job -> Chunk -> Channel -> Connection -> Request.
//
//   Chunk       Small / Medium / Large group of files with its own ChunkParams.
//   Channel     one of the chunk's cc lanes; takes a file and cuts it into up
//               to p ranges.
//   Connection  one TCP connection of a channel (p per channel): a curl multi
//               handle of its own, whose connection pool holds only that
//               connection, so the requests given to it reuse exactly it. Up
//               to pp requests are outstanding on it (HTTP/2 streams) when the
//               origin speaks HTTP/2 (h2, or h2c with prior knowledge); an
//               HTTP/1.1 origin gets back-to-back requests on it instead, and
//               the job says so.
//   Request     one easy handle: a byte range of one file.
//
// A file's missing bytes are cut into one range per connection of its
// channel (under a rate cap, ranges of about two seconds of the cap); a
// raised p reaches a file in flight when an idle connection takes the back
// half of a long request (schedule.cpp: split_min_bytes, split_inflight).
// Chunks are served Large to Small; Medium and Large files largest first,
// Small ones in manifest order (job.cpp says why). Live re-tuning (Job::apply) reconciles the tree with new params:
// new channels and connections start at once; surplus ones are pre-empted and
// the unreceived rest of their ranges goes back to the chunk's queue. Nothing
// received is thrown away and nothing is fetched twice (beyond what a
// pre-empted connection had in flight).
#pragma once

#include <systemd/sd-event.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "xfer/credentials.h"
#include "xfer/flow_monitor.h"
#include "xfer/manifest.h"
#include "xfer/params.h"
#include "xfer/part_file.h"
#include "xfer/tuner.h"

typedef void CURLM;

namespace xfer {

struct Request;
class FileWork;

// One curl_multi on an sd-event loop, through libcurl's socket and timer
// callbacks. Every Connection of a job owns one: libcurl keeps its connection pool
// per multi handle, so a Connection's requests reuse exactly its own TCP connection
// (HTTP/1.1 back to back, HTTP/2 multiplexed). Sharing one multi and
// partitioning its pool with share handles (CURL_LOCK_DATA_CONNECT) does not
// work for HTTP/2: libcurl does not multiplex over a shared cache.
class CurlMulti {
 public:
  explicit CurlMulti(sd_event* loop);
  ~CurlMulti();
  CurlMulti(const CurlMulti&) = delete;
  CurlMulti& operator=(const CurlMulti&) = delete;

  void add(Request* r);
  // Stop a request that has not completed (never from inside a curl callback).
  void remove(Request* r);
  // End a request: removed, and its owner told with `curl_code` (a
  // CURLcode). Finished ones (drain), and those libcurl will not finish by
  // itself (a transfer that failed inside curl_easy_pause); never from
  // inside a curl callback.
  void end(Request* r, int curl_code);

  // http:// origins this handle holds an h2c connection to (or is opening
  // one). libcurl 7.88 breaks a reused connection when a request asks for
  // prior knowledge again (curl PR #10643, fixed in 8.0): only the request
  // that opens the connection asks for it; the others ask for HTTP/2 and
  // multiplex onto it. Dropped when a request fails at the connection level.
  std::set<std::string> h2c_open;

 private:
  static int socket_cb(void* easy, int s, int what, void* userp, void* socketp);
  static int timer_cb(CURLM* multi, long timeout_ms, void* userp);
  static int on_io(sd_event_source* s, int fd, uint32_t revents, void* userdata);
  static int on_timer(sd_event_source* s, uint64_t usec, void* userdata);
  static int on_run_now(sd_event_source* s, void* userdata);
  void action(int fd, int mask);
  void drain();

  sd_event* loop_;
  CURLM* multi_;
  sd_event_source* timer_ = nullptr;    // curl's next deadline (due_), or an earlier one
  uint64_t due_ = 0;
  sd_event_source* run_now_ = nullptr;  // curl asked for 0 ms
  bool ran_now_asked_ = false;          // ...during the current action()
  std::set<sd_event_source*> io_sources_;
  // The job whose requests it carries (RequestOwner::log_job): libcurl's
  // callbacks and the requests' ends log for it (action()).
  uint64_t log_job_ = 0;
};

// The event loop the jobs run on.
class Engine {
 public:
  explicit Engine(sd_event* loop);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  sd_event* loop() const { return loop_; }
  uint64_t now_us() const;
  // Whole-file work (sha256) off the loop, one thread per owner.
  FileWork& file_work() { return *file_work_; }

 private:
  sd_event* loop_;
  std::unique_ptr<FileWork> file_work_;
};

struct EngineOptions {
  std::string http = "auto";  // auto | 1.1 | h2c : how http:// origins are spoken to
  uint64_t min_piece_bytes = 256 * 1024;  // no range is cut smaller than this
  // A request in flight gives the back half of what it still has to fetch to
  // an idle connection of its channel (p raised, or a sibling done first)
  // only when that half is at least this much, or this many BDPs when that
  // is more; under a rate cap, no request asks for less either.
  uint64_t split_min_bytes = 8 * 1024 * 1024;
  double split_bdp_multiple = 8;
  // ...or, for a request that has run a second or more, what it fetches in
  // this many seconds at its own rate, when that is less (but never under
  // split_min_bytes): a slow stream (loss-bound, or capped by its server)
  // gives its back half away sooner. 0: the byte rule alone.
  double split_seconds = 1.0;
  int max_retries = 6;                    // consecutive failures without progress, per file
  long connect_timeout_ms = 15000;
  long stall_timeout_s = 30;      // a request that moves no byte this long is retried (libcurl's low-speed check)
  // ...and the engine's own watch, which libcurl's check cannot replace (a
  // request held by something libcurl does not time): a request of a running
  // job that receives nothing for this long, or 40 RTTs when that is longer,
  // is given up and its range asked again on a new connection.
  double reissue_after_s = 5;
  int discovery_concurrency = 16; // HEAD requests in flight while finding sizes
  long record_ms = 200;           // progress records rewritten this often (no data sync)
  long sync_ms = 5000;            // .part data fdatasync'd and recorded as synced this often
  // An HTTP/1.1 body's socket wakes the loop once about this many ms of the
  // connection's data are waiting (SO_RCVLOWAT, never above what is still
  // due), not at every segment; 0: at every segment.
  long wake_batch_ms = 20;
  // Files of PartFile::kDirectFrom bytes or more are written with O_DIRECT
  // (part_file.h); false: every file through the page cache.
  bool direct_io = true;
  // A resumed file whose bytes nothing ties to a version of the source (the
  // server gave no ETag or Last-Modified, the manifest no sha256) keeps them
  // (true) or is fetched whole (false: the default; a splice is never risked).
  bool unvalidated_resume = false;
  long interval_ms = 5000;        // control interval: observe, tune, apply
  double bandwidth_mbps = 1000;   // link rate for the BDP (assumed unless configured)
  bool bandwidth_configured = false;  // a file or the caller set it; else the link rate is measured (Machine)
  double rtt_ms = 0;              // 0: measured from the TCP handshakes at discovery
  double loss_pct = -1;           // the path's packet loss when known (-1: not), for the tuners
  // What the parameter table knows of the job's path (start_from_path,
  // running_job.h): the link rate and loss its earlier jobs measured. Where
  // no bandwidth_mbps or loss_pct is configured, the job starts from them
  // (the BDP, the tuners' start estimates, the table's lookups); a path's
  // rate is never a cap (the arbiter caps only a configured link).
  double path_link_mbps = 0;  // 0: not known
  double path_loss_pct = -1;  // -1: not known
  std::string path_known;     // where they come from, for the log ("": nowhere)
  int max_channels = 32;
  // Connections opened ahead, at discovery, to each http:// origin that is
  // asked in HTTP/1.1 (--http 1.1), whose probe only connects: the probe's
  // own and this many in all, at once (capped by the origin's files). The
  // transfer's first connections take them, a round trip sooner than new
  // ones; what is left after a few round trips is closed. 1: the probe's
  // connection alone. setup_job sets cc x p for a static policy.
  int preconnect = 1;
  std::string user_agent = "xferd/0.1";
  // A full destination (ENOSPC, EDQUOT) pauses the job with the reason, to
  // carry on after resume() once there is space (the daemon); false: the job
  // stops (xferctl run, whose user can run it again).
  bool pause_when_full = false;
  // A file larger than this fails (0: no limit): checked against the size a
  // manifest or server announces, and while the body of a file without a
  // known size arrives (a server that never stops sending).
  uint64_t max_file_bytes = 0;
  // Response headers larger than this fail the request (a server sending
  // endless headers); libcurl's own limit is higher.
  size_t max_header_bytes = 64 * 1024;
  // PEM certificates that https servers are verified against instead of the
  // system's store (a private CA); empty: the system's. Verification itself
  // is never turned off.
  std::string ca_pem;
  // The job's credentials and proxy (credentials.h), shared by the copies of
  // these options; nullptr: none.
  std::shared_ptr<const JobCredentials> credentials;
};

// A job's state; text only where it leaves the program (D-Bus, the store,
// the report). Queued: not started yet.
// NeedsCredentials (the daemon's): waits for its owner to give credentials
// again (after a restart, which keeps none; or a token refused mid-job).
enum class JobState { Queued, Discovering, Running, Paused, Done, Failed, Cancelled, NeedsCredentials };
const char* to_string(JobState s);
std::optional<JobState> job_state_from(std::string_view text);
inline bool finished(JobState s) { return s == JobState::Done || s == JobState::Failed || s == JobState::Cancelled; }
// The state changes a job may make: an end (Done, Failed, Cancelled) is
// final; back to Queued only from Paused (a job paused before it started);
// any other change of an unfinished job is allowed.
inline bool may_change(JobState from, JobState to) {
  if (finished(from)) return false;
  if (to == JobState::Queued)
    return from == JobState::Paused || from == JobState::Queued || from == JobState::NeedsCredentials;
  return true;
}

struct FailedFile {
  std::string url;
  std::string reason;
};

// What tunes a job while it transfers (the ControlLoop, control_loop.h):
// told when the transfer begins, with what a tuner needs to know, and when
// it ends (before the job's final state).
class JobController {
 public:
  virtual ~JobController() = default;
  // The params to start with.
  virtual Params transfer_begins(const StartFacts& info) = 0;
  virtual void transfer_ends() = 0;
};

// A chunk of a running job.
struct ChunkStatus {
  ChunkKind kind = ChunkKind::Small;
  size_t files_total = 0;
  double avg_size = 0;  // bytes per file as partitioned (ChunkPlan::avg_size)
  double size_sd = 0;   // their standard deviation (ChunkPlan::size_sd)
  ChunkParams params;   // in effect
  uint64_t bytes_total = 0;    // known sizes
  uint64_t bytes_done = 0;     // on disk
  uint64_t bytes_fetched = 0;  // from the network in this run (only grows)
  size_t files_done = 0;
  bool finished = false;
};

// An origin (scheme://host:port) the job fetches from.
struct OriginStatus {
  std::string origin;
  std::string protocol;  // "HTTP/2", "HTTP/1.1" or "unknown"
  std::string tls;       // how its certificate is verified; empty for http://
};

struct JobProgress {
  JobState state = JobState::Queued;
  uint64_t bytes_total = 0;  // known sizes only
  uint64_t bytes_done = 0;   // on disk (resumed + fetched)
  uint64_t bytes_fetched = 0;  // from the network in this run
  uint64_t bytes_resumed = 0;  // already on disk when the run began
  uint64_t body_reads = 0;     // deliveries of body bytes from libcurl: about one per read of a socket
  // Requests asked for under a rate cap that it paused and resumed; of those,
  // the ones it paused again before libcurl had handed over all it held
  // (libcurl copies the rest). (Those in flight when a cap comes are not
  // counted: what libcurl holds of them has no bound.)
  uint64_t cap_resumes = 0, cap_resumes_cut = 0;
  size_t preconnected = 0, preconnected_used = 0;  // connections opened at discovery; taken by the transfer
  size_t files_total = 0, files_done = 0, files_failed = 0, files_skipped = 0;
  size_t source_restarts = 0;    // files started again from zero: their source changed (validator.h)
  size_t files_unvalidated = 0;  // resumed with no validator and no sha256 (fetched whole unless trusted)
  size_t requests_reissued = 0;  // requests that received nothing for reissue_after_s, asked again
  // Failed requests retried on a fresh connection: an answer that was not
  // HTTP on a reused one; libcurl 7.88's HTTP/2 framing error (curl/curl#10634).
  size_t retried_not_http = 0, retried_http2_framing = 0;
  double seconds = 0;
};

class Job {
 public:
  struct Spec {
    Manifest manifest;
    std::string dest_dir;
    EngineOptions opts;
    // The daemon's: the destination opened (and checked) for the caller, used
    // instead of opening dest_dir again (dest_dir then only names it), and the
    // caller who is to own every file the job creates.
    int dest_dir_fd = -1;
    FileOwner owner;
  };
  // Spec errors that need no network (destination unusable) throw here.
  Job(Engine& engine, Spec spec);
  ~Job();
  Job(const Job&) = delete;
  Job& operator=(const Job&) = delete;

  // Before start(): per-flow measurements for this job's sockets (job_id is
  // how the monitor tells this job's flows from others').
  void set_flow_monitor(FlowMonitor* m, uint32_t job_id);
  // The job id its log lines carry in the journal (log::JobScope): its
  // requests' ends and its timers log in that scope. 0: none.
  void set_log_job(uint64_t id);
  // Before start(): what chooses the params (a ControlLoop sets itself).
  // Without one the job runs at cc 1, p 1, pp 1 until apply() says otherwise.
  void set_controller(JobController* c);
  void start();
  // The application layer, live: cc, p, pp per chunk and the rate cap take
  // effect at once. (cores and freq_khz are the ControlLoop's.)
  void apply(const Params& p);
  // The controller's interval begins (its observation is taken): the rate
  // cap holds over each interval on its own, credit from under the cap in
  // the last one is not spent in this one (engine/rate_limit.h).
  void new_interval();
  // Connections open at once to each origin named, whatever the params ask
  // (the arbiter's share of a per-origin limit); a lowered limit stops the
  // newest requests over it (their rest is queued again). Others: no limit.
  void limit_connections(const std::map<std::string, int>& per_origin);
  void pause();
  void resume();
  // Stops the job. keep_partial: every .part stays with its record, for a
  // later run to resume (xferctl interrupted, the daemon stopping for a
  // restart). Otherwise the job's partial files are removed, so that a
  // cancelled job's bytes never count as another job's.
  void cancel(bool keep_partial = true);

  JobState state() const;
  const EngineOptions& options() const;
  JobProgress progress() const;
  // Once the transfer has begun (after discovery): what the tuner was told.
  const StartFacts& info() const;
  std::vector<ChunkStatus> chunks() const;
  std::vector<OriginStatus> origins() const;
  const std::vector<FailedFile>& failed() const;
  // Error that ended the job (destination unusable, disk full), empty if none.
  const std::string& fatal_error() const;
  // Why the job paused by itself (a full destination), empty otherwise.
  const std::string& pause_reason() const;
  // Paused because the credentials an origin accepted before are refused
  // now (401 mid-job: a token expired); resume() after set_credentials().
  bool needs_credentials() const;
  // New credentials (the owner refreshed them) for the requests made from now on.
  void set_credentials(std::shared_ptr<const JobCredentials> c);
  // The chunk a flow of this job belongs to; forget_flow once it closed.
  std::optional<size_t> chunk_of_flow(uint64_t flow_id) const;
  void forget_flow(uint64_t flow_id);

  std::function<void()> on_finished;
  // Every state change, as it happens (before on_finished for the last one).
  std::function<void(JobState)> on_state;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace xfer
