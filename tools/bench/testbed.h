// The test bed that xfer-bench and xfer-hla collect share: an emulated link
// (xfer-linkemu up, two network namespaces), nginx in the server's
// namespace, and generated datasets cached on disk.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "measure.h"
#include "scenario.h"

namespace bench {

std::string self_dir();    // where this program is (build/bin)
std::string source_dir();  // the source tree ($XFER_SOURCE_DIR or the build's)
int sh(const std::string& cmd);

// The emulated link, as a child process (xfer-linkemu up).
// xfer-linkemu between a client and a server namespace; or, for a loopback
// link, one namespace of the test bed's own (its lo up) that both share.
class LinkProcess {
 public:
  LinkProcess(const LinkSpec& l, const std::string& name, int index, const std::string& log);
  ~LinkProcess();
  LinkProcess(const LinkProcess&) = delete;
  LinkProcess& operator=(const LinkProcess&) = delete;
  // Stops it; returns the counters it prints when it stops.
  std::string stop();
  std::string client_ns, server_ns, server_ip;

 private:
  std::string read_line(int timeout_ms);
  std::string loop_ns_;  // the loopback namespace (empty: xfer-linkemu)
  pid_t pid_ = -1;
  int out_ = -1;
};

// nginx (scripts/nginx-serve.sh) in the link's server namespace, serving
// data_root on 8080 (HTTP/1.1) and 8081 (h2c); stopped when it goes.
// The server's certificate for https (port 8443: TLS 1.3/1.2, ALPN h2 and
// http/1.1), signed by a CA the test bed made.
struct TlsSiteFiles {
  std::string cert_file, key_file;
};
// A CA of the test bed's own, in dir (ca.crt), and a certificate it signs for
// the link's server address; the CA is what every client is given.
struct BenchTls {
  std::string ca_file;
  TlsSiteFiles site;
};
BenchTls make_bench_tls(const std::string& dir, const std::string& server_ip);

class NginxInNs {
 public:
  static constexpr int kHttpsPort = 8443;
  NginxInNs(const LinkProcess& link, const std::string& run_dir, const std::string& data_root,
            const TlsSiteFiles* tls = nullptr);
  ~NginxInNs();
  NginxInNs(const NginxInNs&) = delete;
  NginxInNs& operator=(const NginxInNs&) = delete;
  pid_t master() const;

 private:
  std::string run_dir_;
};

// What a shell command printed on stdout ("" if it could not run).
std::string capture(const std::string& cmd);
// capture() without the trailing newline and spaces.
std::string capture_line(const std::string& cmd);

// Where the clients write their files. By default a journaled ext4 (what
// mkfs.ext4 makes on Debian) in an image file under the bench's output,
// mounted through a loop device with direct I/O: every client then writes
// to the same kind of file system whatever holds OUT. This machine's root is
// an ext4 without a journal, where each new inode is chosen past the ones
// deleted in the last minute (ext4's recently_deleted): a run that followed
// the deletion of the run before it spent 20-45% of curl --parallel's CPU
// creating files on wan-tls html, more or less depending on the order of the
// runs. kind "out-dir" writes under OUT itself instead.
class DestFs {
 public:
  static constexpr const char* kImage = "ext4-image";
  static constexpr const char* kOutDir = "out-dir";
  // bytes: the most one run writes; the image gets room for it and a margin.
  DestFs(const std::string& kind, const std::string& out, uint64_t bytes);
  ~DestFs();
  DestFs(const DestFs&) = delete;
  DestFs& operator=(const DestFs&) = delete;
  std::string root;      // where each run makes its destination directory
  std::string describe;  // one line for the summary

 private:
  void release();
  std::string image_, loop_;
};

struct PreparedDataset {
  std::string id;  // directory under the data root, and the dataset's label
  std::vector<ExpectedFile> files;
  uint64_t bytes = 0;
};
// Generates (once) and lists a dataset of the spec under root.
PreparedDataset prepare(const DatasetSpec& d, bool quick, const std::string& root);

}  // namespace bench
