// Issue 40: authenticated sources, and secrets that never leak. nginx checks
// each kind of credential (auth_basic, a bearer token, an API key header, a
// client certificate from a CA the test makes); a second server on another
// port logs every credential header it receives: whatever arrives there
// after a redirect is a leak. Each secret is a canary grepped for wherever
// xferd writes or shows anything.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <sstream>
#include <thread>

#include "daemon.h"
#include "daemon_env.h"
#include "fixture.h"
#include "flaky_server.h"
#include "xfer/sha256.h"

#include <openssl/evp.h>
#include "tls.h"
#include "xfer/credentials.h"
#include "xfer/manifest.h"

namespace fs = std::filesystem;
using namespace xtest;

namespace {

// A configuration's own policies replace the built-in ones: these are the defaults' names.
const std::string kDefaults = "[policy.min-energy]\nalgorithm = \"min-energy\"\n[policy.app-min-energy]\nalgorithm = \"min-energy\"\n";

const std::string kToken = "xfercanaryBEARER7f3a";
const std::string kPassword = "xfercanaryPASS91c2";
const std::string kApiKey = "xfercanaryAPIKEY55d0";
const std::string kCanary = "xfercanary";  // every secret's prefix

// nginx with the credential-checking locations; `other` is a second origin
// (another port) that serves the same files to anyone and logs the
// credential headers it is sent.
struct AuthSite {
  Dataset d = dataset(4, 1, 0);
  // Digest and SigV4 are checked by the test server (nginx has neither);
  // nginx passes them through to it, over HTTP/1.1 and HTTP/2 alike.
  std::string content = std::string(300 * 1024, 'c') + "end";
  FlakyServer checker{content};
  TestCa ca;
  std::string certs = make_temp_dir("certs");
  int other = free_port(), tls_port = free_port();
  Nginx nginx;
  AuthSite()
      : nginx(d.dir, "1m", {}, [this](Nginx& n) {
          std::string server = ca.issue({}).write(certs, "server");
          std::ofstream(n.run + "/ca.pem") << ca.cert_pem();
          std::ofstream(n.run + "/htpasswd") << "alice:{PLAIN}" << kPassword << "\n";
          std::string data = d.dir, run = n.run, o = std::to_string(other);
          std::ofstream(n.run + "/locations.d/auth.conf")
              << "location /basic/ { auth_basic \"xfer\"; auth_basic_user_file " << run << "/htpasswd; alias " << data << "/; }\n"
              << "location /bearer/ { if ($http_authorization != \"Bearer " << kToken << "\") { return 401; } alias " << data
              << "/; }\n"
              << "location /slow-bearer/ { if ($http_authorization != \"Bearer " << kToken << "\") { return 401; } alias "
              << data << "/; limit_rate 400k; }\n"
              << "location /apikey/ { if ($http_x_api_key != \"" << kApiKey << "\") { return 401; } alias " << data << "/; }\n"
              << "location /to-port/ { rewrite ^/to-port/(.*)$ http://127.0.0.1:" << o << "/$1 redirect; }\n"
              << "location /to-host/ { rewrite ^/to-host/(.*)$ http://localhost:" << o << "/$1 redirect; }\n"
              << "location /to-same/ { rewrite ^/to-same/(.*)$ /bearer/$1 redirect; }\n"
              << "location ~ ^/(digest|sigv4)/ { proxy_pass http://127.0.0.1:" << checker.port
              << "; proxy_set_header Host $http_host; proxy_http_version 1.1; }\n";
          std::ofstream(n.run + "/sites.d/auth.conf")
              << "log_format headers '$server_port \"$http_authorization\" \"$http_x_api_key\" \"$http_cookie\" "
                 "\"$http_proxy_authorization\" \"$http_referer\" \"$request\"';\n"
              << "server { listen 127.0.0.1:" << o << "; access_log " << run << "/other.log headers; root " << data
              << "; }\n"
              << "server { listen 127.0.0.1:" << tls_port << " ssl http2; ssl_certificate " << server
              << ".crt; ssl_certificate_key " << server << ".key; ssl_client_certificate " << run
              << "/ca.pem; ssl_verify_client optional;\n"
              << "  location /mtls/ { if ($ssl_client_verify != SUCCESS) { return 403; } alias " << data << "/; }\n"
              << "  include " << run << "/locations.conf; }\n";
        }) {}
  ~AuthSite() { fs::remove_all(certs); }
  std::string https(const std::string& path) const { return "https://127.0.0.1:" + std::to_string(tls_port) + path; }
  // Lines for the files [from, from + n) under base.
  std::string manifest(const std::string& base, size_t n = 99, size_t from = 0) const {
    std::string m;
    for (size_t i = from; i < d.files.size() && i < from + n; ++i)
      m += base + d.files[i].name + " " + std::to_string(d.files[i].size) + " sha256:" + d.files[i].sha256 + "\n";
    return m;
  }
  std::string other_log() const { return file_bytes(nginx.run + "/other.log"); }
  // n copies of the checker's content under base.
  std::string checked(const std::string& base, int n = 3) const {
    std::string m, sha = xfer::sha256_hex(content);
    for (int i = 0; i < n; ++i) m += base + "f" + std::to_string(i) + ".bin " + std::to_string(content.size()) + " sha256:" + sha + "\n";
    return m;
  }
};

xfer::EngineOptions with(std::shared_ptr<xfer::JobCredentials> c, const std::string& ca_pem = "") {
  xfer::EngineOptions o;
  o.credentials = std::move(c);
  o.ca_pem = ca_pem;
  return o;
}

std::shared_ptr<xfer::JobCredentials> for_origin(const std::string& url, std::function<void(xfer::Credentials&)> fill) {
  auto c = std::make_shared<xfer::JobCredentials>();
  xfer::Credentials k;
  k.origin = xfer::url_origin(url);
  fill(k);
  c->origins.push_back(std::move(k));
  return c;
}

std::string env_dest(uid_t owner) {
  std::string d = make_temp_dir("dest");
  chown(d.c_str(), owner, owner);
  return d;
}

int requests_for(const Nginx& n, const std::string& path_part) {
  int count = 0;
  for (const LogLine& l : n.log())
    if (l.path.find(path_part) != std::string::npos) ++count;
  return count;
}

// systemd's credentials for xferd as LoadCredential= gives them: a directory
// holding registry-token (the canary token), in $CREDENTIALS_DIRECTORY.
std::string registry_token_credentials() {
  std::string creds = make_temp_dir("creds");
  std::ofstream(creds + "/registry-token") << kToken << "\n";
  chmod((creds + "/registry-token").c_str(), 0400);
  setenv("CREDENTIALS_DIRECTORY", creds.c_str(), 1);
  return creds;
}

}  // namespace

TEST(Credentials, EachKindWorksOverHttp11AndHttp2) {
  AuthSite s;
  for (bool h2 : {false, true}) {
    std::string proto = h2 ? "h2c" : "http/1.1";
    struct Case {
      const char* path;
      std::function<void(xfer::Credentials&)> fill;
    };
    for (const Case& c : {Case{"/basic/",
                               [](xfer::Credentials& k) {
                                 k.user = "alice";
                                 k.password = xfer::Secret(kPassword);
                               }},
                          Case{"/bearer/", [](xfer::Credentials& k) { k.bearer = xfer::Secret(kToken); }},
                          Case{"/apikey/", [](xfer::Credentials& k) {
                                 k.headers.emplace_back("X-Api-Key", xfer::Secret(kApiKey));
                               }}}) {
      std::string base = s.nginx.url(h2, c.path), dest = make_temp_dir("dest");
      auto r = run_job(s.manifest(base), dest, "static", {2, 1, h2 ? 2 : 1}, with(for_origin(base, c.fill)));
      ASSERT_EQ(r.state, xfer::JobState::Done) << proto << " " << c.path << r.summary.dump(1);
      EXPECT_EQ(r.summary["files_failed"], 0) << proto << " " << c.path << r.summary["failed"].dump(1);
      expect_identical(s.d, dest);
      // Without them, the same location refuses each file, once, saying nothing was sent.
      std::string bare = make_temp_dir("dest");
      s.nginx.clear_log();
      auto no = run_job(s.manifest(base, 1), bare, "static", {1, 1, 1}, {});
      EXPECT_EQ(no.summary["files_failed"], 1) << no.summary.dump(1);
      EXPECT_NE(failure_of(no.summary, s.d.files[0].name).find("no credentials were sent"), std::string::npos)
          << no.summary["failed"].dump(1);
      EXPECT_EQ(requests_for(s.nginx, s.d.files[0].name), 1) << "a 401 is not retried";
      fs::remove_all(dest);
      fs::remove_all(bare);
    }
  }
  // A client certificate, over HTTP/1.1 (pp 1: ALPN offers http/1.1) and HTTP/2.
  xtest::CertSpec client;
  client.common_name = "xfer test client";
  client.alt_names = "";
  client.ext_key_usage = "clientAuth";
  xtest::CertKey ck = s.ca.issue(client);
  for (int pp : {1, 2}) {
    std::string base = s.https("/mtls/"), dest = make_temp_dir("dest");
    auto creds = for_origin(base, [&](xfer::Credentials& k) {
      k.client_cert = xfer::Secret(ck.cert_pem);
      k.client_key = xfer::Secret(ck.key_pem);
    });
    auto r = run_job(s.manifest(base), dest, "static", {2, 1, pp}, with(creds, s.ca.cert_pem()));
    ASSERT_EQ(r.state, xfer::JobState::Done) << r.summary.dump(1);
    EXPECT_EQ(r.summary["files_failed"], 0) << "pp " << pp << r.summary["failed"].dump(1);
    // The key encrypted with a passphrase: with it the same; without, the file fails saying so.
    std::string locked = xtest::encrypted_key(ck.key_pem, kPassword), dest2 = make_temp_dir("dest");
    auto with_pass = for_origin(base, [&](xfer::Credentials& k) {
      k.client_cert = xfer::Secret(ck.cert_pem);
      k.client_key = xfer::Secret(locked);
      k.key_passphrase = xfer::Secret(kPassword);
    });
    r = run_job(s.manifest(base), dest2, "static", {2, 1, pp}, with(with_pass, s.ca.cert_pem()));
    EXPECT_EQ(r.summary["files_failed"], 0) << "passphrase, pp " << pp << r.summary["failed"].dump(1);
    fs::remove_all(dest2);
    dest2 = make_temp_dir("dest");
    auto no_pass = for_origin(base, [&](xfer::Credentials& k) {
      k.client_cert = xfer::Secret(ck.cert_pem);
      k.client_key = xfer::Secret(locked);
    });
    r = run_job(s.manifest(base, 1), dest2, "static", {1, 1, 1}, with(no_pass, s.ca.cert_pem()));
    EXPECT_EQ(r.summary["files_failed"], 1) << r.summary.dump(1);
    EXPECT_EQ(r.summary.dump().find(kCanary), std::string::npos);
    fs::remove_all(dest2);
    std::string bare = make_temp_dir("dest");
    auto no = run_job(s.manifest(base, 1), bare, "static", {1, 1, 1}, with(nullptr, s.ca.cert_pem()));
    EXPECT_NE(failure_of(no.summary, s.d.files[0].name).find("HTTP 403"), std::string::npos) << no.summary.dump(1);
    fs::remove_all(dest);
    fs::remove_all(bare);
  }
}

// Digest and S3 SigV4, checked by a server that recomputes them (to it over
// HTTP/1.1, and through nginx: SigV4 over HTTP/2, Digest over a TLS site
// that offers HTTP/2). A wrong SigV4 secret is refused (403), saying SigV4
// was sent.
TEST(Credentials, DigestAndSigV4WorkOverHttp11AndHttp2) {
  AuthSite s;
  s.checker.digest_user = "alice";
  s.checker.digest_password = kPassword;
  s.checker.sigv4_access = "AKIDXFERTEST";
  s.checker.sigv4_secret = kPassword;
  std::string direct = "http://127.0.0.1:" + std::to_string(s.checker.port);
  // Digest: to the checker (HTTP/1.1), and through nginx's TLS site, which
  // offers HTTP/2: xferd speaks HTTP/1.1 to an origin it may answer a Digest
  // challenge on (libcurl 7.88 fails the challenge's second round on HTTP/2).
  for (const std::string& root : {direct, s.https("")}) {
    std::string base = root + "/digest/", dest = make_temp_dir("dest");
    auto digest = for_origin(base, [](xfer::Credentials& k) {
      k.user = "alice";
      k.password = xfer::Secret(kPassword);
      k.auth = xfer::AuthKind::Digest;
    });
    auto r = run_job(s.checked(base), dest, "static", {2, 1, 2}, with(digest, s.ca.cert_pem()));
    EXPECT_EQ(r.summary["files_failed"], 0) << root << r.summary["failed"].dump(1);
    EXPECT_EQ(r.summary["files_skipped"], 0) << root;
    fs::remove_all(dest);
  }
  // SigV4 (no challenge): to the checker, and through nginx over h2c.
  for (const std::string& root : {direct, s.nginx.url(true, "")}) {
    bool h2 = root != direct;
    std::string base = root + "/sigv4/", dest = make_temp_dir("dest");
    auto sig = [&](const std::string& secret) {
      return for_origin(base, [&](xfer::Credentials& k) {
        k.sigv4 = "aws:amz:us-east-1:s3";
        k.user = "AKIDXFERTEST";
        k.password = xfer::Secret(secret);
      });
    };
    auto r = run_job(s.checked(base), dest, "static", {2, 1, h2 ? 2 : 1}, with(sig(kPassword)));
    EXPECT_EQ(r.summary["files_failed"], 0) << root << r.summary["failed"].dump(1);
    EXPECT_EQ(r.summary["files_skipped"], 0) << root;
    if (h2) {
      bool spoke_h2 = false;
      for (const auto& o : r.summary["origins"]) spoke_h2 = spoke_h2 || o.value("protocol", "") == "HTTP/2";
      EXPECT_TRUE(spoke_h2) << r.summary["origins"].dump();
    }
    std::string bad = make_temp_dir("dest");
    r = run_job(s.checked(base, 1), bad, "static", {1, 1, 1}, with(sig("wrong")));
    std::string why = failure_of(r.summary, "f0.bin");
    EXPECT_NE(why.find("HTTP 403"), std::string::npos) << why;
    EXPECT_NE(why.find("SigV4"), std::string::npos) << why;
    fs::remove_all(dest);
    fs::remove_all(bad);
  }
  EXPECT_GT(s.checker.auth_ok.load(), 0);
  // Digest, then a redirect to another origin: no Digest answer goes there.
  std::string base = "http://127.0.0.1:" + std::to_string(s.checker.port) + "/", dest = make_temp_dir("dest");
  std::string m = s.checked(base + "digest/", 1) + s.checked(base + "to/" + std::to_string(s.other) + "/x", 1);
  auto digest = for_origin(base, [](xfer::Credentials& k) {
    k.user = "alice";
    k.password = xfer::Secret(kPassword);
    k.auth = xfer::AuthKind::Any;
  });
  run_job(m, dest, "static", {1, 1, 1}, with(digest));
  std::string got = s.other_log();
  EXPECT_NE(got.find("GET /xf0.bin"), std::string::npos) << got;
  EXPECT_EQ(got.find("Digest"), std::string::npos) << got;
  fs::remove_all(dest);
}

// The leak history of curl, wget and aria2 (CVE-2018-1000007, wget
// CVE-2021-31879, aria2 #1176, CVE-2022-27774, CVE-2022-27776, CVE-2025-14524,
// follow-redirects CVE-2026-40895): credentials of every kind, a secret
// custom header and a lower-case "authorization" header among them, are
// never sent after a redirect to another host, nor to the same host on
// another port; the files still come, from where they were sent.
TEST(Credentials, NoneFollowARedirectToAnotherOrigin) {
  AuthSite s;
  for (const char* via : {"/to-port/", "/to-host/"}) {
    for (bool h2 : {false, true}) {
      std::string base = s.nginx.url(h2, via), dest = make_temp_dir("dest");
      auto creds = for_origin(base, [](xfer::Credentials& k) {
        k.bearer = xfer::Secret(kToken);
        k.headers.emplace_back("X-Api-Key", xfer::Secret(kApiKey));
        k.headers.emplace_back("authorization", xfer::Secret("Bearer " + kToken));
        k.headers.emplace_back("Cookie2", xfer::Secret(kPassword));
      });
      auto r = run_job(s.manifest(base), dest, "static", {2, 2, h2 ? 2 : 1}, with(creds));
      ASSERT_EQ(r.state, xfer::JobState::Done) << via << r.summary.dump(1);
      EXPECT_EQ(r.summary["files_failed"], 0) << via << r.summary["failed"].dump(1);
      expect_identical(s.d, dest);
      fs::remove_all(dest);
    }
    // Basic (user and password) the same way.
    std::string base = s.nginx.url(false, via), dest = make_temp_dir("dest");
    auto basic = for_origin(base, [](xfer::Credentials& k) {
      k.user = "alice";
      k.password = xfer::Secret(kPassword);
      k.auth = xfer::AuthKind::Any;
    });
    auto r = run_job(s.manifest(base), dest, "static", {2, 1, 1}, with(basic));
    EXPECT_EQ(r.summary["files_failed"], 0) << r.summary["failed"].dump(1);
    fs::remove_all(dest);
  }
  std::string got = s.other_log();
  EXPECT_NE(got.find("GET /"), std::string::npos) << "the redirects were followed: " << got;
  EXPECT_EQ(got.find(kCanary), std::string::npos) << got;
  EXPECT_EQ(got.find("Basic "), std::string::npos) << got;
  // Within the origin a redirect keeps them: /to-same/ leads to /bearer/, which checks.
  std::string base = s.nginx.url(false, "/to-same/"), dest = make_temp_dir("dest");
  auto r = run_job(s.manifest(base), dest, "static", {2, 1, 1},
                   with(for_origin(base, [](xfer::Credentials& k) { k.bearer = xfer::Secret(kToken); })));
  EXPECT_EQ(r.summary["files_failed"], 0) << r.summary["failed"].dump(1);
  fs::remove_all(dest);
}

// https -> http is refused, with credentials or without, unless the job
// allows the downgrade; and even then no credential goes to the http origin.
TEST(Credentials, HttpsNeverRedirectsToHttpUnlessAllowed) {
  AuthSite s;
  std::string base = s.https("/to-port/");
  auto creds = for_origin(base, [](xfer::Credentials& k) { k.bearer = xfer::Secret(kToken); });
  for (bool with_creds : {true, false}) {
    std::string dest = make_temp_dir("dest");
    auto r = run_job(s.manifest(base, 1), dest, "static", {1, 1, 1}, with(with_creds ? creds : nullptr, s.ca.cert_pem()));
    EXPECT_EQ(r.summary["files_failed"], 1) << r.summary.dump(1);
    std::string why = failure_of(r.summary, s.d.files[0].name);
    EXPECT_NE(why.find(with_creds ? "https URL redirected to http" : "https to http"), std::string::npos) << why;
    EXPECT_FALSE(fs::exists(dest + "/" + s.d.files[0].name));
    fs::remove_all(dest);
  }
  auto allowed = std::make_shared<xfer::JobCredentials>(*creds);
  allowed->allow_downgrade = true;
  std::string dest = make_temp_dir("dest");
  auto r = run_job(s.manifest(base), dest, "static", {2, 1, 1}, with(allowed, s.ca.cert_pem()));
  EXPECT_EQ(r.summary["files_failed"], 0) << r.summary["failed"].dump(1);
  expect_identical(s.d, dest);
  EXPECT_EQ(s.other_log().find(kCanary), std::string::npos) << s.other_log();
  fs::remove_all(dest);
}

// A refused credential fails its file once, saying what was sent; nothing
// is retried (no storm of 401s).
TEST(Credentials, ARefusalSaysWhatWasSentAndIsNotRetried) {
  AuthSite s;
  std::string base = s.nginx.url(false, "/bearer/"), dest = make_temp_dir("dest");
  s.nginx.clear_log();
  auto r = run_job(s.manifest(base), dest, "static", {2, 1, 1},
                   with(for_origin(base, [](xfer::Credentials& k) { k.bearer = xfer::Secret("wrong-" + kToken); })));
  EXPECT_EQ(r.summary["files_failed"], int(s.d.files.size())) << r.summary.dump(1);
  std::string why = failure_of(r.summary, s.d.files[0].name);
  EXPECT_NE(why.find("HTTP 401"), std::string::npos) << why;
  EXPECT_NE(why.find("sent: bearer token"), std::string::npos) << why;
  EXPECT_EQ(r.summary.dump().find(kCanary), std::string::npos);
  // One request a file (and the protocol probe's HEAD).
  EXPECT_LE(int(s.nginx.log().size()), int(s.d.files.size()) + 1) << "a 401 is not retried";
  fs::remove_all(dest);
}

// End to end through xferd, as an unprivileged user: secrets from files
// (never argv), a job that succeeds (with redirects to another origin), one
// refused, and one killed with xferd (kill -9): after the restart it waits
// in needs-credentials until its owner gives them again, then carries on
// from where it stopped. Another user gets no signal of these jobs, and
// cannot read, replace or use their credentials. Afterwards no canary is in
// the log, the store, the history, any property, or ps.
TEST(Credentials, ThroughXferdNoSecretLeaks) {
  PrivateBus bus;
  AuthSite s;
  Xferd xferd(config());
  xferd.start();
  // The owner's secrets, in files only nobody can read.
  std::string home = make_temp_dir("nobody");
  chown(home.c_str(), kNobody, kNobody);
  chmod(home.c_str(), 0700);
  auto secret_file = [&](const std::string& name, const std::string& text) {
    std::string p = home + "/" + name;
    std::ofstream(p) << text;
    chown(p.c_str(), kNobody, kNobody);
    chmod(p.c_str(), 0600);
    return p;
  };
  std::string token = secret_file("token", kToken + "\n"), wrong = secret_file("wrong", "wrong-" + kToken + "\n");
  std::string headers = secret_file("headers", "X-Api-Key: " + kApiKey + "\n");
  std::string m_ok = secret_file("ok.m", s.manifest(s.nginx.url(false, "/bearer/"), 2) +
                                             s.manifest(s.nginx.url(false, "/to-port/"), 99, 2));
  // Another user listens with a plain match rule (no eavesdropping).
  std::string mon = make_temp_dir("monitor");
  chmod(mon.c_str(), 0777);
  sh("setpriv --reuid 1 --regid 1 --clear-groups gdbus monitor --system --dest org.xferd.Xferd1 > " + mon +
     "/out 2>&1 & echo $! > " + mon + "/pid");
  std::this_thread::sleep_for(std::chrono::milliseconds(300));

  // A file nobody may not read is not read for them: xferctl opens it as its user.
  std::string root_only = make_temp_dir("rootonly") + "/token";
  std::ofstream(root_only) << "root-secret\n";
  chmod(root_only.c_str(), 0600);
  std::string dest = env_dest(kNobody);
  Shell deputy = run(as_nobody(bin("xferctl") + " submit --manifest " + m_ok + " --dest " + dest +
                               " --bearer-token-file " + root_only));
  EXPECT_EQ(deputy.status, 2) << deputy.out;
  EXPECT_NE(deputy.out.find("Permission denied"), std::string::npos) << deputy.out;

  // 1: succeeds; the redirected files come from the other origin without credentials.
  Shell ok = run(as_nobody(bin("xferctl") + " submit --manifest " + m_ok + " --dest " + dest + " --bearer-token-file " +
                           token + " --header-file " + headers + " --wait --no-progress"));
  EXPECT_EQ(ok.status, 0) << ok.out;
  // 2: refused: the files fail with what was sent.
  std::string dest2 = env_dest(kNobody);
  Shell bad = run(as_nobody(bin("xferctl") + " submit --manifest " + m_ok + " --dest " + dest2 +
                            " --bearer-token-file " + wrong + " --wait --json --no-progress"));
  EXPECT_EQ(bad.status, 1) << bad.out;
  EXPECT_NE(bad.out.find("sent: bearer token"), std::string::npos) << bad.out;
  // 3: killed with xferd mid-job.
  std::string dest3 = env_dest(kNobody);
  std::string m_slow = secret_file("slow.m", s.manifest(s.nginx.url(false, "/slow-bearer/")));
  Shell sub = run(as_nobody(bin("xferctl") + " submit --manifest " + m_slow + " --dest " + dest3 +
                            " --bearer-token-file " + token + " --json"));
  ASSERT_EQ(sub.status, 0) << sub.out;
  std::string path = object_path(sub.out);
  ASSERT_FALSE(path.empty()) << sub.out;
  std::string id = path.substr(path.rfind('/') + 1);
  EXPECT_EQ(wait_state(path, {"running"}, 30), "running");
  Shell ps = run("ps -eo args");
  EXPECT_EQ(ps.out.find(kCanary), std::string::npos) << ps.out;
  std::this_thread::sleep_for(std::chrono::seconds(2));
  xferd.kill9();
  xferd.start();
  EXPECT_EQ(wait_state(path, {"needs-credentials"}, 20), "needs-credentials") << xferd.log();
  EXPECT_NE(job_property(path, "Error").find("give them again"), std::string::npos);
  Shell resume = run(as_nobody(bin("xferctl") + " resume " + id));
  EXPECT_NE(resume.status, 0) << resume.out;
  // Another user can neither give nor replace them.
  Shell other = run("setpriv --reuid 1 --regid 1 --clear-groups " + bin("xferctl") + " credentials " + id +
                    " --bearer-token-file /dev/null");
  EXPECT_NE(other.status, 0) << other.out;
  EXPECT_NE(other.out.find("NoSuchJob"), std::string::npos) << other.out;
  Shell give = run(as_nobody(bin("xferctl") + " credentials " + id + " --bearer-token-file " + token));
  EXPECT_EQ(give.status, 0) << give.out;
  EXPECT_EQ(wait_state(path, {"done", "failed"}, 90), "done") << xferd.log();
  expect_identical(s.d, dest3);
  // 4: netrc, for the job's origin only: a redirect to another port of the
  // same host gets nothing (CVE-2024-11053).
  std::string netrc = secret_file("netrc", "machine 127.0.0.1 login alice password " + kPassword + "\n");
  std::string dest4 = env_dest(kNobody);
  std::string m_netrc = secret_file("netrc.m", s.manifest(s.nginx.url(false, "/basic/"), 2) +
                                                   s.manifest(s.nginx.url(false, "/to-port/"), 99, 2));
  Shell viarc = run(as_nobody(bin("xferctl") + " submit --manifest " + m_netrc + " --dest " + dest4 + " --netrc-file " +
                              netrc + " --wait --no-progress"));
  EXPECT_EQ(viarc.status, 0) << viarc.out;
  // 5: a user and password, cancelled while it runs.
  std::string password = secret_file("password", kPassword + "\n"), dest5 = env_dest(kNobody);
  std::string m_cancel = secret_file("cancel.m", s.manifest(s.nginx.url(false, "/slow/")));
  Shell sub5 = run(as_nobody(bin("xferctl") + " submit --manifest " + m_cancel + " --dest " + dest5 +
                             " --user alice --password-file " + password + " --header-file " + headers + " --json"));
  ASSERT_EQ(sub5.status, 0) << sub5.out;
  std::string path5 = object_path(sub5.out);
  wait_state(path5, {"running", "done", "failed"}, 30);
  Shell cancel = run(as_nobody(bin("xferctl") + " cancel " + path5.substr(path5.rfind('/') + 1)));
  EXPECT_EQ(cancel.status, 0) << cancel.out;
  EXPECT_EQ(wait_state(path5, {"cancelled"}, 30), "cancelled");
  // 6: a client certificate (its key the secret), with the job's own CA.
  xtest::CertSpec client;
  client.common_name = "xfer test client";
  client.alt_names = "";
  client.ext_key_usage = "clientAuth";
  xtest::CertKey ck = s.ca.issue(client);
  std::string cert = secret_file("client.crt", ck.cert_pem), key = secret_file("client.key", ck.key_pem);
  std::string ca = secret_file("ca.pem", s.ca.cert_pem()), dest6 = env_dest(kNobody);
  std::string m_tls = secret_file("tls.m", s.manifest(s.https("/mtls/")));
  Shell mtls = run(as_nobody(bin("xferctl") + " submit --manifest " + m_tls + " --dest " + dest6 + " --ca-file " + ca +
                             " --client-cert " + cert + " --client-key " + key + " --wait --no-progress"));
  EXPECT_EQ(mtls.status, 0) << mtls.out;
  expect_identical(s.d, dest6);
  // The private key's body, as a canary of its own.
  std::string key_body = ck.key_pem.substr(ck.key_pem.find('\n') + 1, 40);
  ASSERT_EQ(key_body.size(), 40u);

  sh("kill $(cat " + mon + "/pid)");
  std::string heard = file_bytes(mon + "/out");
  EXPECT_NE(heard.find("is owned by"), std::string::npos) << "the other user's monitor listened: " << heard;
  EXPECT_EQ(heard.find("org.xferd.Job1"), std::string::npos) << heard;
  EXPECT_EQ(heard.find("PropertiesChanged"), std::string::npos) << heard;
  // Every property of every job, as root (who sees them all), and the tree.
  std::string seen;
  for (int j = 1; j <= 6; ++j)
    seen += run("busctl get-property --json=short org.xferd.Xferd1 /org/xferd/Xferd1/job/" + std::to_string(j) +
                " org.xferd.Job1 Summary Error Label Destination State")
                .out +
            run("busctl introspect org.xferd.Xferd1 /org/xferd/Xferd1/job/" + std::to_string(j)).out;
  // What xferctl shows the owner, and root.
  seen += run(as_nobody(bin("xferctl") + " history --json")).out + run(bin("xferctl") + " history --json").out +
          run(as_nobody(bin("xferctl") + " status " + id + " --json")).out + run(bin("xferctl") + " list --json").out;
  EXPECT_NE(seen.find("done"), std::string::npos) << seen;
  EXPECT_NE(seen.find("cancelled"), std::string::npos) << seen;
  EXPECT_EQ(seen.find(kCanary), std::string::npos) << seen;
  EXPECT_EQ(seen.find(key_body), std::string::npos) << seen;
  std::string got = s.other_log();
  EXPECT_NE(got.find("GET /"), std::string::npos) << got;
  EXPECT_EQ(got.find(kCanary), std::string::npos) << got;
  EXPECT_EQ(got.find("Basic "), std::string::npos) << got;
  xferd.stop();
  for (const auto& e : fs::directory_iterator(xferd.state_dir)) {
    if (!e.is_regular_file()) continue;
    EXPECT_EQ(file_bytes(e.path()).find(kCanary), std::string::npos) << e.path();
    EXPECT_EQ(file_bytes(e.path()).find(key_body), std::string::npos) << e.path();
    if (e.path().filename().string().rfind("xferd.db", 0) == 0 || e.path().filename().string().rfind("history.db", 0) == 0) {
      EXPECT_EQ(fs::status(e.path()).permissions() & (fs::perms::group_all | fs::perms::others_all), fs::perms::none)
          << e.path();
    }
  }
  EXPECT_EQ(xferd.log().find(kCanary), std::string::npos);
  EXPECT_EQ(xferd.log().find(key_body), std::string::npos);
  for (const std::string& d : {dest, dest2, dest3, dest4, dest5, dest6})
    for (const auto& e : fs::directory_iterator(d)) EXPECT_EQ(file_bytes(e.path()).find(kCanary), std::string::npos) << e.path();
  fs::remove_all(home);
}

namespace {

// tinyproxy from Debian, asking for a user and password (BasicAuth).
struct Tinyproxy {
  int port = free_port();
  std::string dir = make_temp_dir("tinyproxy");
  Tinyproxy(const std::string& user, const std::string& password) {
    std::ofstream(dir + "/conf") << "Port " << port << "\nListen 127.0.0.1\nTimeout 60\nMaxClients 50\nAllow 127.0.0.1\n"
                                 << "BasicAuth " << user << " " << password << "\nLogLevel Info\n";
    sh("tinyproxy -d -c " + dir + "/conf > " + dir + "/log 2>&1 & echo $! > " + dir + "/pid");
    for (int i = 0; i < 100 && sh("bash -c 'exec 3<>/dev/tcp/127.0.0.1/" + std::to_string(port) + "' 2>/dev/null") != 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ~Tinyproxy() {
    sh("kill $(cat " + dir + "/pid) 2>/dev/null");
    fs::remove_all(dir);
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port); }
};

std::string base64(const std::string& s) {
  std::string out(4 * ((s.size() + 2) / 3) + 1, '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), reinterpret_cast<const unsigned char*>(s.data()),
                          int(s.size()));
  out.resize(size_t(n));
  return out;
}

// As root, a job on the slow bearer-checking location with the token from a
// file in dir (policy `one`); its object path, "" when the submit failed.
std::string submit_slow_bearer(const AuthSite& s, const std::string& dir, const std::string& dest) {
  std::ofstream(dir + "/token") << kToken;
  std::ofstream(dir + "/m") << s.manifest(s.nginx.url(false, "/slow-bearer/"));
  Shell sub = run(bin("xferctl") + " submit --manifest " + dir + "/m --dest " + dest + " --policy one --bearer-token-file " +
                  dir + "/token --json");
  EXPECT_EQ(sub.status, 0) << sub.out;
  return object_path(sub.out);
}

}  // namespace

// A proxy with its own user and password (tinyproxy, BasicAuth): the job goes
// through it with them, is refused without them (407, once), and they reach
// only that proxy: not the origin, not a redirect's origin, not another
// proxy a later job uses (CVE-2026-6253). no_proxy hosts are reached directly.
TEST(Credentials, AProxyWithItsOwnCredentials) {
  AuthSite s;
  const std::string kProxyPass = "xfercanaryPROXY3e1b";
  Tinyproxy proxy("proxyuser", kProxyPass);
  std::string base = s.nginx.url(false, "/bearer/");
  auto through = [&](const std::string& url, bool with_pass) {
    auto c = for_origin(url, [](xfer::Credentials& k) { k.bearer = xfer::Secret(kToken); });
    c->proxy.url = proxy.url();
    if (with_pass) c->proxy.user = "proxyuser", c->proxy.password = xfer::Secret(kProxyPass);
    return c;
  };
  std::string dest = make_temp_dir("dest");
  auto r = run_job(s.manifest(base), dest, "static", {2, 1, 1}, with(through(base, true)));
  ASSERT_EQ(r.state, xfer::JobState::Done) << r.summary.dump(1);
  EXPECT_EQ(r.summary["files_failed"], 0) << r.summary["failed"].dump(1);
  expect_identical(s.d, dest);
  EXPECT_NE(file_bytes(proxy.dir + "/log").find("/bearer/"), std::string::npos) << "it went through the proxy";
  fs::remove_all(dest);
  dest = make_temp_dir("dest");
  r = run_job(s.manifest(base, 1), dest, "static", {1, 1, 1}, with(through(base, false)));
  EXPECT_NE(failure_of(r.summary, s.d.files[0].name).find("407"), std::string::npos) << r.summary.dump(1);
  fs::remove_all(dest);
  // https through it (CONNECT, with the proxy's credentials), HTTP/2 inside the tunnel.
  std::string tls = s.https("/bearer/");
  dest = make_temp_dir("dest");
  r = run_job(s.manifest(tls), dest, "static", {2, 1, 2}, with(through(tls, true), s.ca.cert_pem()));
  EXPECT_EQ(r.summary["files_failed"], 0) << r.summary["failed"].dump(1);
  expect_identical(s.d, dest);
  EXPECT_NE(file_bytes(proxy.dir + "/log").find("CONNECT"), std::string::npos) << file_bytes(proxy.dir + "/log");
  fs::remove_all(dest);
  // Redirected through the proxy to another origin: neither the token nor the proxy's password goes there.
  std::string away = s.nginx.url(false, "/to-port/");
  dest = make_temp_dir("dest");
  r = run_job(s.manifest(away), dest, "static", {2, 1, 1}, with(through(away, true)));
  EXPECT_EQ(r.summary["files_failed"], 0) << r.summary["failed"].dump(1);
  fs::remove_all(dest);
  // A later job whose proxy is the logging server: the first proxy's password never reaches it.
  auto other_proxy = std::make_shared<xfer::JobCredentials>();
  other_proxy->proxy.url = "http://127.0.0.1:" + std::to_string(s.other);
  dest = make_temp_dir("dest");
  r = run_job(s.manifest(s.nginx.url(false, "/"), 1), dest, "static", {1, 1, 1}, with(other_proxy));
  EXPECT_EQ(r.summary["files_failed"], 0) << r.summary["failed"].dump(1);
  fs::remove_all(dest);
  std::string got = s.other_log();
  EXPECT_NE(got.find("GET http://127.0.0.1"), std::string::npos) << "the second job used it as its proxy: " << got;
  EXPECT_EQ(got.find(kCanary), std::string::npos) << got;
  EXPECT_EQ(got.find(base64("proxyuser:" + kProxyPass)), std::string::npos) << got;
  // no_proxy: a proxy that is not even listening is not needed for those hosts.
  auto bypass = through(base, true);
  bypass->proxy.url = "http://127.0.0.1:" + std::to_string(free_port());
  bypass->proxy.no_proxy = "127.0.0.1";
  dest = make_temp_dir("dest");
  r = run_job(s.manifest(base), dest, "static", {2, 1, 1}, with(bypass));
  EXPECT_EQ(r.summary["files_failed"], 0) << r.summary["failed"].dump(1);
  fs::remove_all(dest);
}

// A policy's credentials come from systemd credentials ($CREDENTIALS_DIRECTORY,
// LoadCredential=), never from the config; a job under it needs none of its
// own. A credential that is missing fails the job, naming it.
TEST(Credentials, APolicysCredentialsComeFromSystemdCredentials) {
  PrivateBus bus;
  AuthSite s;
  std::string creds = registry_token_credentials();
  std::string origin = s.nginx.url(false, "/");
  Xferd xferd(config(kDefaults + "[policy.registry]\nalgorithm = \"min-energy\"\ncredentials_origin = \"" + origin +
                     "\"\nbearer_token_credential = \"registry-token\"\n"
                     "[policy.broken]\nalgorithm = \"min-energy\"\ncredentials_origin = \"" + origin +
                     "\"\nbearer_token_credential = \"absent\"\n"));
  xferd.start();
  unsetenv("CREDENTIALS_DIRECTORY");
  std::string dest = make_temp_dir("dest"), m = make_temp_dir("m") + "/m";
  std::ofstream(m) << s.manifest(s.nginx.url(false, "/bearer/"));
  Shell ok = run(bin("xferctl") + " submit --manifest " + m + " --dest " + dest + " --policy registry --wait --no-progress");
  EXPECT_EQ(ok.status, 0) << ok.out << xferd.log();
  expect_identical(s.d, dest);
  std::string dest2 = make_temp_dir("dest");
  Shell bad = run(bin("xferctl") + " submit --manifest " + m + " --dest " + dest2 + " --policy broken --wait --no-progress");
  EXPECT_NE(bad.status, 0) << bad.out;
  EXPECT_NE(xferd.log().find("credential 'absent'"), std::string::npos) << xferd.log();
  xferd.stop();
  EXPECT_EQ(xferd.log().find(kCanary), std::string::npos);
  for (const auto& e : fs::directory_iterator(xferd.state_dir))
    if (e.is_regular_file()) {
      EXPECT_EQ(file_bytes(e.path()).find(kCanary), std::string::npos) << e.path();
    }
  fs::remove_all(creds);
  fs::remove_all(dest);
  fs::remove_all(dest2);
}

// Issue 53, finding 4: a user of a policy whose admin gave it a credential
// for an origin brings their own proxy (the logging origin, which sees an
// absolute-form request with every header) or their own CA file for the
// https origin (a proxy of theirs could then terminate TLS with a certificate
// that CA vouches for): the admin's token reaches neither. The job goes on
// without it (401: failed with the reason) and xferd says it was withheld.
TEST(Credentials, APolicysSecretNeverGoesToTheCallersProxyOrCa) {
  PrivateBus bus;
  AuthSite s;
  std::string creds = registry_token_credentials();
  std::string http = s.nginx.url(false, "/"), https = s.https("/");
  Xferd xferd(config(kDefaults + "[policy.registry]\nalgorithm = \"min-energy\"\ncredentials_origin = \"" + http +
                     "\"\nbearer_token_credential = \"registry-token\"\n"
                     "[policy.registry-tls]\nalgorithm = \"min-energy\"\ncredentials_origin = \"" + https +
                     "\"\nbearer_token_credential = \"registry-token\"\n"));
  xferd.start();
  unsetenv("CREDENTIALS_DIRECTORY");
  std::string dir = make_temp_dir("m"), ca = dir + "/ca.pem";
  std::ofstream(ca) << s.ca.cert_pem();
  std::ofstream(dir + "/http") << s.manifest(s.nginx.url(false, "/bearer/"), 1);
  std::ofstream(dir + "/https") << s.manifest(s.https("/bearer/"), 1);
  std::string proxy = "http://127.0.0.1:" + std::to_string(s.other);
  std::vector<std::string> dests;
  auto submit = [&](const std::string& args) {
    dests.push_back(make_temp_dir("dest"));
    return run(bin("xferctl") + " submit " + args + " --dest " + dests.back() + " --wait --no-progress 2>&1");
  };
  Shell via_proxy = submit("--manifest " + dir + "/http --policy registry --proxy " + proxy);
  EXPECT_NE(via_proxy.status, 0) << via_proxy.out;
  EXPECT_NE(s.other_log().find(" http://127.0.0.1"), std::string::npos) << "the job used its proxy: " << s.other_log();
  Shell own_ca = submit("--manifest " + dir + "/https --policy registry-tls --ca-file " + ca);
  EXPECT_NE(own_ca.status, 0) << own_ca.out;
  EXPECT_NE(own_ca.out.find("401"), std::string::npos) << own_ca.out;
  // Without either, the same policies' token is sent and the files come.
  Shell plain = submit("--manifest " + dir + "/http --policy registry");
  EXPECT_EQ(plain.status, 0) << plain.out << xferd.log();
  xferd.stop();
  EXPECT_EQ(s.other_log().find(kCanary), std::string::npos) << s.other_log();
  EXPECT_NE(xferd.log().find("withheld: the job brings its own proxy"), std::string::npos) << xferd.log();
  EXPECT_NE(xferd.log().find("withheld: the job brings its own CA file"), std::string::npos) << xferd.log();
  EXPECT_EQ(xferd.log().find(kCanary), std::string::npos);
  fs::remove_all(creds);
  fs::remove_all(dir);
  for (const auto& d : dests) fs::remove_all(d);
}

// Issue 53, finding 8: a job's secrets go when it ends, and what one user's
// unfinished jobs hold is bounded (limits.max_secret_kib_per_user, 4 MiB by
// default). 100 jobs, each with a token of about 1 MB (the per-value cap),
// submitted and cancelled one after another: the memory xferd's secrets hold
// is back where it was; four at once are taken, the fifth refused.
TEST(Credentials, SecretsAreWipedAtTheEndAndBoundedPerUser) {
  PrivateBus bus;
  Xferd xferd(config(kDefaults));
  xferd.start();
  // The memory of xferd's secrets: the mappings marked wipe-on-fork (VmFlags
  // "wf"), which only Secret makes. (VmLck would say the same where mlock
  // works, but AddressSanitizer makes mlock a no-op.)
  auto secret_kib = [&] {
    std::ifstream f("/proc/" + std::to_string(xferd.pid()) + "/smaps");
    long kib = 0, size = 0;
    for (std::string line; std::getline(f, line);) {
      if (line.rfind("Size:", 0) == 0) size = std::stol(line.substr(5));
      else if (line.rfind("VmFlags:", 0) == 0 && line.find(" wf") != std::string::npos) kib += size;
    }
    return f.eof() ? kib : -1L;
  };
  std::string dir = make_temp_dir("m");
  // Nothing listens there: the job retries with backoff until it is cancelled.
  std::ofstream(dir + "/m") << "http://127.0.0.1:" << free_port() << "/f 1000\n";
  std::ofstream(dir + "/token") << kCanary << std::string(1000000 - kCanary.size(), 't') << "\n";
  std::string dest = make_temp_dir("dest");
  int n = 0;
  auto submit = [&] {  // a directory each: a name is written by one unfinished job at a time
    std::string d = dest + "/" + std::to_string(n++);
    fs::create_directory(d);
    return run(bin("xferctl") + " submit --manifest " + dir + "/m --dest " + d + " --bearer-token-file " + dir +
               "/token 2>&1");
  };
  long idle = secret_kib();
  ASSERT_GE(idle, 0);
  for (int i = 0; i < 100; ++i) {
    Shell sub = submit();
    ASSERT_EQ(sub.status, 0) << i << ": " << sub.out;
    std::string path = sub.out.substr(0, sub.out.find('\n'));
    ASSERT_EQ(run(bin("xferctl") + " cancel " + path).status, 0) << i;
  }
  EXPECT_LE(secret_kib(), idle) << "secrets of cancelled jobs are still held";
  std::vector<std::string> held;
  for (int i = 0; i < 4; ++i) {
    Shell sub = submit();
    ASSERT_EQ(sub.status, 0) << i << ": " << sub.out;
    held.push_back(sub.out.substr(0, sub.out.find('\n')));
  }
  EXPECT_GT(secret_kib(), idle + 3000) << "four jobs' tokens are held";
  Shell fifth = submit();
  EXPECT_NE(fifth.status, 0);
  EXPECT_NE(fifth.out.find("SecretsTooLarge"), std::string::npos) << fifth.out;
  EXPECT_NE(fifth.out.find("max_secret_kib_per_user"), std::string::npos) << fifth.out;
  EXPECT_EQ(fifth.out.find(kCanary), std::string::npos) << fifth.out;
  for (const auto& p : held) run(bin("xferctl") + " cancel " + p);
  EXPECT_LE(secret_kib(), idle);
  xferd.stop();
  EXPECT_EQ(xferd.log().find(kCanary), std::string::npos);
  fs::remove_all(dir);
  fs::remove_all(dest);
}

// A token that expires mid-job (rucio #5457, #6590): the origin starts
// refusing it (nginx reloaded with a new token); the job moves to
// needs-credentials instead of failing its files, and carries on from where
// it stopped once its owner gives the new token.
TEST(Credentials, ATokenThatExpiresMidJobWaitsForANewOne) {
  PrivateBus bus;
  AuthSite s;
  // One file at a time: the files after the first start after the token expired.
  Xferd xferd(config(kDefaults + "[policy.one]\nalgorithm = \"min-energy\"\nmax_channels = 1\n"));
  xferd.start();
  std::string dir = make_temp_dir("secrets"), dest = make_temp_dir("dest");
  std::ofstream(dir + "/new-token") << kToken << "-renewed";
  std::string path = submit_slow_bearer(s, dir, dest);
  ASSERT_FALSE(path.empty());
  std::string id = path.substr(path.rfind('/') + 1);
  ASSERT_EQ(wait_state(path, {"running"}, 30), "running");
  std::this_thread::sleep_for(std::chrono::seconds(1));
  // The token expires: the origin now wants the renewed one.
  std::string conf = file_bytes(s.nginx.run + "/locations.d/auth.conf");
  for (size_t at = 0; (at = conf.find("Bearer " + kToken + "\"", at)) != std::string::npos; at += 8)
    conf.replace(at, 7 + kToken.size(), "Bearer " + kToken + "-renewed");
  std::ofstream(s.nginx.run + "/locations.d/auth.conf") << conf;
  ASSERT_EQ(sh("nginx -s reload -c " + s.nginx.run + "/nginx.conf -p " + s.nginx.run), 0);
  ASSERT_EQ(wait_state(path, {"needs-credentials", "done", "failed"}, 60), "needs-credentials") << xferd.log();
  EXPECT_NE(job_property(path, "Error").find("answered 401 to credentials it accepted before"), std::string::npos)
      << job_property(path, "Error");
  EXPECT_EQ(job_property(path, "FilesFailed"), "0");
  Shell give = run(bin("xferctl") + " credentials " + id + " --bearer-token-file " + dir + "/new-token");
  EXPECT_EQ(give.status, 0) << give.out;
  EXPECT_EQ(wait_state(path, {"done", "failed"}, 90), "done") << xferd.log();
  EXPECT_EQ(job_property(path, "FilesFailed"), "0");
  expect_identical(s.d, dest);
  fs::remove_all(dir);
  fs::remove_all(dest);
}

// xferd leaves no core file, whatever kills it: it is not dumpable (even
// with its core limit raised from outside, as root can), and the secrets'
// own pages are excluded from dumps. The same signal leaves a core for an
// ordinary process: the pattern works.
TEST(Credentials, XferdLeavesNoCoreFile) {
  std::string cores = make_temp_dir("cores");
  std::string saved = file_bytes("/proc/sys/kernel/core_pattern");
  struct Restore {
    std::string pattern;
    ~Restore() { std::ofstream("/proc/sys/kernel/core_pattern") << pattern; }
  } restore{saved};
  std::ofstream("/proc/sys/kernel/core_pattern") << cores << "/core.%e.%p";
  // SIGABRT: its default action dumps core (the sanitizers of the test build
  // handle SIGSEGV themselves; a background job of a script ignores SIGQUIT).
  sh("bash -c 'ulimit -c unlimited; sleep 30 & p=$!; sleep 0.2; kill -ABRT $p; wait $p' 2>/dev/null");
  size_t control = 0;
  for (const auto& e : fs::directory_iterator(cores)) control += e.path().filename().string().rfind("core.sleep", 0) == 0;
  ASSERT_EQ(control, 1u) << "the core pattern works for an ordinary process";
  PrivateBus bus;
  AuthSite s;
  Xferd xferd(config(kDefaults + "[policy.one]\nalgorithm = \"min-energy\"\n"));
  xferd.start();
  std::string dir = make_temp_dir("secrets"), dest = make_temp_dir("dest");
  std::string path = submit_slow_bearer(s, dir, dest);
  ASSERT_FALSE(path.empty());
  ASSERT_EQ(wait_state(path, {"running"}, 30), "running");
  sh("prlimit --core=unlimited --pid " + std::to_string(xferd.pid()) + " 2>/dev/null");
  kill(xferd.pid(), SIGABRT);
  xferd.stop();  // reaps it
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  for (const auto& e : fs::directory_iterator(cores))
    EXPECT_EQ(e.path().filename().string().rfind("core.sleep", 0), 0u) << "xferd left " << e.path();
  fs::remove_all(cores);
  fs::remove_all(dir);
  fs::remove_all(dest);
}

// xferctl run (no daemon) takes the same credential flags, checked the same
// way: from files, bound to the manifest's origins.
TEST(Credentials, XferctlRunTakesTheSameFlags) {
  AuthSite s;
  std::string dir = make_temp_dir("secrets"), dest = make_temp_dir("dest");
  std::ofstream(dir + "/token") << kToken << "\n";
  std::ofstream(dir + "/m") << s.manifest(s.nginx.url(false, "/bearer/"));
  Shell ok = run(bin("xferctl") + " run --manifest " + dir + "/m --dest " + dest + " --bearer-token-file " + dir +
                 "/token --json --no-progress");
  EXPECT_EQ(ok.status, 0) << ok.out;
  expect_identical(s.d, dest);
  EXPECT_EQ(ok.out.find(kCanary), std::string::npos) << ok.out;
  Shell elsewhere = run(bin("xferctl") + " run --manifest " + dir + "/m --dest " + dest + " --bearer-token-file " + dir +
                        "/token --credentials-origin https://elsewhere.example/");
  EXPECT_EQ(elsewhere.status, 2) << elsewhere.out;
  EXPECT_NE(elsewhere.out.find("not an origin of the job's entries"), std::string::npos) << elsewhere.out;
  // netrc with a user in the URL and no password (CVE-2026-8926): a URL with
  // any user information is refused before anything is sent.
  std::ofstream(dir + "/netrc") << "machine 127.0.0.1 login alice password " << kPassword << "\n";
  std::string with_user = s.nginx.url(false, "/basic/");
  with_user.insert(with_user.find("://") + 3, "alice@");
  std::ofstream(dir + "/m2") << with_user << s.d.files[0].name << "\n";
  s.nginx.clear_log();
  Shell user_url = run(bin("xferctl") + " run --manifest " + dir + "/m2 --dest " + dest + " --netrc-file " + dir + "/netrc");
  EXPECT_EQ(user_url.status, 2) << user_url.out;
  EXPECT_NE(user_url.out.find("credentials in URLs are not accepted"), std::string::npos) << user_url.out;
  EXPECT_TRUE(s.nginx.log().empty());
  EXPECT_EQ(user_url.out.find(kCanary), std::string::npos) << user_url.out;
  fs::remove_all(dir);
  fs::remove_all(dest);
}
