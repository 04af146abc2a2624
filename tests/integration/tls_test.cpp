// https: nginx over TLS with certificates from a CA the test makes. The right
// CA verifies over HTTP/1.1 and over HTTP/2 (ALPN picks); a self-signed, an
// expired, a not yet valid or another host's certificate fails its file with
// the reason and leaves nothing at the final name; the system's store does
// not know the test CA, and a job's own CA certificates replace the system's.
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/mount.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "fixture.h"
#include "tls.h"

namespace fs = std::filesystem;
using namespace xtest;

namespace {

std::string line(const std::string& url, const xfer::GeneratedFile& f) {
  return url + " " + std::to_string(f.size) + " sha256:" + f.sha256 + "\n";
}

}  // namespace

TEST(Tls, TheRightCaVerifiesHttp11AndHttp2ChosenByAlpn) {
  Dataset d = dataset(8, 2, 1, 0.05);
  TestCa ca;
  std::string certs = make_temp_dir("certs");
  std::string good = ca.issue({}).write(certs, "good");
  Nginx nginx(d.dir, "4m", {{good + ".crt", good + ".key", false}, {good + ".crt", good + ".key", true}});
  std::string m;
  for (size_t i = 0; i < d.files.size(); ++i) m += line(nginx.tls[i % 2].url("/" + d.files[i].name), d.files[i]);
  std::string dest = make_temp_dir("dest");
  xfer::EngineOptions o;
  o.ca_pem = ca.cert_pem();
  auto r = run_job(m, dest, "static", {2, 2, 2}, o);
  ASSERT_EQ(r.state, xfer::JobState::Done) << r.summary.dump(1);
  EXPECT_EQ(r.summary["files_failed"], 0) << r.summary["failed"].dump(1);
  expect_identical(d, dest);
  expect_no_partials(dest);
  // ALPN: the h1-only site answered HTTP/1.1, the other HTTP/2.
  std::map<int, std::set<std::string>> protos;
  for (const LogLine& l : nginx.log()) protos[l.port].insert(l.proto);
  EXPECT_EQ(protos[nginx.tls[0].port], std::set<std::string>{"HTTP/1.1"});
  EXPECT_EQ(protos[nginx.tls[1].port], std::set<std::string>{"HTTP/2.0"});
  std::set<std::string> seen;
  for (const auto& origin : r.summary["origins"]) {
    seen.insert(origin["protocol"].get<std::string>());
    EXPECT_NE(origin.value("tls", "").find("the job's own CA certificates only"), std::string::npos) << origin.dump();
  }
  EXPECT_EQ(seen, (std::set<std::string>{"HTTP/1.1", "HTTP/2"})) << r.summary["origins"].dump(1);
  fs::remove_all(dest);
  fs::remove_all(certs);
}

// A connection that carries one request at a time (pp = 1) offers HTTP/1.1
// alone in ALPN, even to a site that speaks HTTP/2: HTTP/2's framing would
// cost CPU for nothing. With pp > 1 the requests share HTTP/2 connections,
// the first of them the protocol probe's.
TEST(Tls, OnlyConnectionsThatMultiplexSpeakHttp2) {
  Dataset d = dataset(8, 2, 1, 0.05);
  TestCa ca;
  std::string certs = make_temp_dir("certs");
  std::string good = ca.issue({}).write(certs, "good");
  Nginx nginx(d.dir, "4m", {{good + ".crt", good + ".key", true}});
  std::string m;
  for (const auto& f : d.files) m += line(nginx.tls[0].url("/" + f.name), f);
  xfer::EngineOptions o;
  o.ca_pem = ca.cert_pem();
  size_t seen = 0;
  for (int pp : {1, 4}) {
    std::string dest = make_temp_dir("dest");
    auto r = run_job(m, dest, "static", {2, 2, pp}, o);
    ASSERT_EQ(r.state, xfer::JobState::Done) << r.summary.dump(1);
    EXPECT_EQ(r.summary["files_failed"], 0) << r.summary["failed"].dump(1);
    expect_identical(d, dest);
    expect_no_partials(dest);
    std::vector<LogLine> log = nginx.log();
    std::set<std::string> gets;
    std::set<long> head_conns, get_conns;
    int n = 0;
    for (size_t i = seen; i < log.size(); ++i) {
      if (log[i].method == "GET") gets.insert(log[i].proto), get_conns.insert(log[i].conn), ++n;
      if (log[i].method == "HEAD") head_conns.insert(log[i].conn);
    }
    seen = log.size();
    EXPECT_GE(n, int(d.files.size())) << "pp=" << pp;
    EXPECT_EQ(gets, std::set<std::string>{pp == 1 ? "HTTP/1.1" : "HTTP/2.0"}) << "pp=" << pp;
    // The probe (the one HEAD: the manifest gives every size) negotiated h2.
    // With pp > 1 the transfer's first connection is the probe's; with pp = 1
    // the connections offer HTTP/1.1 alone and cannot take it over.
    ASSERT_EQ(head_conns.size(), 1u) << "pp=" << pp;
    EXPECT_EQ(get_conns.count(*head_conns.begin()), pp > 1 ? 1u : 0u) << "pp=" << pp;
    fs::remove_all(dest);
  }
  fs::remove_all(certs);
}

TEST(Tls, UntrustedCertificatesFailTheirFileWithTheReason) {
  Dataset d = dataset(6, 2, 0);
  TestCa ca;
  std::string certs = make_temp_dir("certs");
  CertSpec expired, early, wrong_host;
  expired.valid_from_s = -10 * 86400, expired.valid_until_s = -86400;
  early.valid_from_s = 86400, early.valid_until_s = 10 * 86400;
  wrong_host.alt_names = "DNS:files.example.org";
  std::vector<std::string> bases = {ca.issue({}).write(certs, "good"), self_signed({}).write(certs, "self"),
                                    ca.issue(expired).write(certs, "expired"), ca.issue(early).write(certs, "early"),
                                    ca.issue(wrong_host).write(certs, "wrong-host")};
  std::vector<TlsSite> sites;
  for (size_t i = 0; i < bases.size(); ++i) sites.push_back({bases[i] + ".crt", bases[i] + ".key", i % 2 == 1});
  Nginx nginx(d.dir, "4m", sites);
  const auto& f = d.files;
  struct Case {
    size_t site;
    const char* reason;  // "": arrives
  };
  const Case cases[] = {{0, ""},
                        {1, "self-signed certificate"},
                        {2, "certificate has expired"},
                        {3, "certificate is not yet valid"},
                        {4, "no alternative certificate subject name matches target host name"}};
  std::string m;
  for (const Case& c : cases) m += line(nginx.tls[c.site].url("/" + f[c.site].name), f[c.site]);
  std::string dest = make_temp_dir("dest");
  xfer::EngineOptions o;
  o.ca_pem = ca.cert_pem();
  o.max_retries = 1;
  auto r = run_job(m, dest, "static", {2, 1, 1}, o);
  ASSERT_EQ(r.state, xfer::JobState::Done) << r.summary.dump(1);
  for (const Case& c : cases) {
    const std::string& name = f[c.site].name;
    std::string why = failure_of(r.summary, nginx.tls[c.site].url("/"));
    if (!*c.reason) {
      EXPECT_EQ(why, "") << name;
      expect_identical(d, dest, {name});
      continue;
    }
    EXPECT_NE(why.find("TLS: the server's certificate was refused"), std::string::npos) << name << ": " << why;
    EXPECT_NE(why.find(c.reason), std::string::npos) << name << ": " << why;
    EXPECT_FALSE(fs::exists(dest + "/" + name)) << name << " reached its final name";
  }
  expect_no_partials(dest);
  // No one is asked twice about a certificate: it is not retried.
  for (const LogLine& l : nginx.log()) EXPECT_EQ(l.port, nginx.tls[0].port) << "a request got through to " << l.port;

  // Without CA certificates of its own the job has the system's store,
  // which does not know the test CA.
  std::string dest2 = make_temp_dir("dest");
  auto r2 = run_job(line(nginx.tls[0].url("/" + f[0].name), f[0]), dest2, "static", {1, 1, 1}, {});
  ASSERT_EQ(r2.state, xfer::JobState::Done) << r2.summary.dump(1);
  std::string why = failure_of(r2.summary, f[0].name);
  EXPECT_NE(why.find("unable to get local issuer certificate"), std::string::npos) << why;
  EXPECT_FALSE(fs::exists(dest2 + "/" + f[0].name));
  expect_no_partials(dest2);
  EXPECT_NE(r2.summary["origins"][0].value("tls", "").find("system's CA store"), std::string::npos)
      << r2.summary["origins"].dump();
  fs::remove_all(dest);
  fs::remove_all(dest2);
  fs::remove_all(certs);
}

// In a private mount namespace the system's store (/etc/ssl/certs, both the
// bundle file and the hashed directory curl reads) holds only the test CA:
// a job without CA certificates of its own is verified by it, and a job with
// another CA's certificates is verified against those alone (the system's
// directory is not added to them).
TEST(Tls, AJobsCaCertificatesReplaceTheSystemStore) {
  Dataset d = dataset(6, 2, 0);
  TestCa ca, other_ca("another test CA");
  std::string certs = make_temp_dir("certs"), store = make_temp_dir("store");
  std::string good = ca.issue({}).write(certs, "good");
  std::ofstream(store + "/ca-certificates.crt") << ca.cert_pem();
  std::ofstream(store + "/" + ca.subject_hash() + ".0") << ca.cert_pem();
  ASSERT_EQ(unshare(CLONE_NEWNS), 0);
  ASSERT_EQ(mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr), 0);
  ASSERT_EQ(mount(store.c_str(), "/etc/ssl/certs", nullptr, MS_BIND, nullptr), 0);
  Nginx nginx(d.dir, "4m", {{good + ".crt", good + ".key", true}});
  const auto& f = d.files[0];
  std::string m = line(nginx.tls[0].url("/" + f.name), f);
  for (const std::string& pem : {std::string(), other_ca.cert_pem()}) {
    std::string dest = make_temp_dir("dest");
    xfer::EngineOptions o;
    o.ca_pem = pem;
    auto r = run_job(m, dest, "static", {1, 1, 1}, o);
    ASSERT_EQ(r.state, xfer::JobState::Done) << r.summary.dump(1);
    std::string why = failure_of(r.summary, f.name);
    if (pem.empty()) {
      EXPECT_EQ(why, "");
      expect_identical(d, dest, {f.name});
    } else {
      EXPECT_NE(why.find("unable to get local issuer certificate"), std::string::npos) << why;
      EXPECT_FALSE(fs::exists(dest + "/" + f.name));
    }
    expect_no_partials(dest);
    fs::remove_all(dest);
  }
  fs::remove_all(certs);
  fs::remove_all(store);
}
