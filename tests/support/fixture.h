// What the integration tests share: a private nginx on loopback (through
// scripts/nginx-serve.sh, the same server the README and benchmarks use),
// datasets, an in-process job runner and checks.
#pragma once

#include <sys/types.h>

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "xfer/datagen.h"
#include "xfer/control_loop.h"
#include "xfer/engine.h"
#include "xfer/running_job.h"

namespace xtest {

std::string make_temp_dir(const std::string& tag);
// Moves this test process (and what it starts later) into a network namespace
// of its own, loopback up. The namespace has no name and vanishes with the
// process. Idempotent.
void isolate_network();
// Shapes that namespace's loopback into a bottleneck of mbit Mbit/s (tbf,
// MTU 1500), so transfers last long enough to watch; 0 removes the shaping.
void set_link_rate(int mbit);
int free_port();
// Runs a shell command; returns its exit status.
int sh(const std::string& cmd);
std::string capture(const std::string& cmd);  // its stdout
std::string file_bytes(const std::string& path);  // the whole file, byte for byte ("" when unreadable)
// Starts `xfer-linkemu up ARGS` (stdout to `out`) and waits for its ready
// line. The link gets SIGTERM when the calling thread exits, so a test that
// ctest kills (its timeout) takes its link down with it (xfer-linkemu tears
// its namespaces down on SIGTERM, ending what runs in them, nginx included):
// call it from the test's own thread.
pid_t start_link(const std::string& args, const std::string& out);
std::string bin(const std::string& name);  // build/bin/NAME

struct LogLine {
  double end_s = 0, dur_s = 0;
  long conn = 0, conn_requests = 0;
  std::string proto;
  int status = 0;
  uint64_t bytes = 0;
  std::string method, path, range;
  int port = 0;
  double start_s() const { return end_s - dur_s; }
};

// An https server of the private nginx: its certificate and key (PEM files)
// and whether ALPN offers h2 (else only http/1.1). The port is nginx's choice
// of the fixture's, filled in when it starts.
struct TlsSite {
  std::string cert_file, key_file;
  bool h2 = false;
  int port = 0;
  std::string url(const std::string& path) const { return "https://127.0.0.1:" + std::to_string(port) + path; }
};

// A server a fixture started that outlives its starter (it daemonizes) is
// stopped by `stop_cmd` if the test dies first (killed by ctest's timeout,
// a crash): a child of its own session waits for the test to go, and runs
// the command unless the fixture said it stopped the server itself. Its
// child does nothing but read, exec and exit (fork from a test's threads).
class StopIfTestDies {
 public:
  explicit StopIfTestDies(const std::string& stop_cmd);
  ~StopIfTestDies();  // the fixture stopped it: nothing to do
  StopIfTestDies(const StopIfTestDies&) = delete;
  StopIfTestDies& operator=(const StopIfTestDies&) = delete;

 private:
  int fd_ = -1;
  pid_t pid_ = -1;
};

class Nginx {
 public:
  // rate: nginx limit_rate for /slow/ (per connection, or per stream on h2).
  // prepare: called before each start attempt, once the ports are chosen and
  // sites.d written: a test adds its own servers (RUN/sites.d/*.conf) and
  // locations (RUN/locations.d/*.conf).
  explicit Nginx(const std::string& data_dir, const std::string& rate = "4m", std::vector<TlsSite> tls = {},
                 std::function<void(Nginx&)> prepare = {});
  ~Nginx();
  std::string url(bool h2c, const std::string& path) const;
  std::vector<TlsSite> tls;
  std::vector<LogLine> log() const;
  void clear_log() const;
  int h1 = 0, h2 = 0;
  std::string run;

 private:
  std::unique_ptr<StopIfTestDies> reaper_;
};

struct Dataset {
  std::string dir;
  std::vector<xfer::GeneratedFile> files;
  uint64_t bytes = 0;
  // Manifest lines for the files, URLs from base (e.g. nginx.url(false, "/")).
  std::string manifest(const std::string& base, bool with_size = true, bool with_sha = true) const;
};
// html (~100 KB), image (~2.4 MB) and video (~222 MB x video_scale) files, cached in the build tree.
Dataset dataset(int html, int image, int video, double video_scale = 0.5);

struct RunResult {
  nlohmann::json summary;
  xfer::JobState state = xfer::JobState::Queued;
  uint64_t bytes_fetched = 0;
};
// Called after each interval; a hook may apply params through the loop.
using IntervalHook = std::function<void(xfer::ControlLoop&, const xfer::IntervalRecord&)>;
RunResult run_job(const std::string& manifest_text, const std::string& dest, const std::string& policy,
                  xfer::ChunkParams fixed, xfer::EngineOptions opts, IntervalHook hook = {},
                  double max_seconds = 120);

// Every file of the dataset (or the named ones) is in dest, byte-identical.
void expect_identical(const Dataset& d, const std::string& dest, const std::vector<std::string>& only = {});
// The reason a job summary gives for the failed file whose URL contains
// url_part; "" when no such file failed.
std::string failure_of(const nlohmann::json& summary, const std::string& url_part);
// No .part / .progress leftovers in dest.
void expect_no_partials(const std::string& dest);
// Client-side TCP connections in ESTABLISHED state to 127.0.0.1:port.
int established_to(int port);
// Largest number of requests in flight at once, from the access log (optionally one connection).
int max_overlap(const std::vector<LogLine>& lines);

}  // namespace xtest
