// daemon/job_credentials: a policy's secrets come from systemd credentials
// and go only where the admin sent them; a CA bundle is bounded and must
// hold a certificate. No bus, no daemon: $CREDENTIALS_DIRECTORY is a
// temporary directory of this test's.
#include "job_credentials.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace fs = std::filesystem;
using xferd::Policy;

namespace {

constexpr const char* kPem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";

struct CredentialsDir {
  CredentialsDir() {
    std::string tmpl = (fs::temp_directory_path() / "xfer-creds-XXXXXX").string();
    if (mkdtemp(tmpl.data())) dir = tmpl;
    setenv("CREDENTIALS_DIRECTORY", dir.c_str(), 1);
  }
  ~CredentialsDir() {
    unsetenv("CREDENTIALS_DIRECTORY");
    fs::remove_all(dir);
  }
  void put(const std::string& name, const std::string& text) { std::ofstream(dir + "/" + name) << text; }
  std::string dir;
};

Policy with_token(const std::string& origin) {
  Policy p;
  p.name = "mirror";
  p.credentials_origin = origin;
  p.bearer_token_credential = "mirror-token";
  return p;
}

}  // namespace

TEST(JobCredentials, APolicysTokenIsReadFromItsSystemdCredentialForTheOriginsTheJobUses) {
  CredentialsDir creds;
  creds.put("mirror-token", "CANARY-token-7f3\n");
  Policy p = with_token("https://mirror.example");
  std::string withheld;
  auto c = xferd::with_policy_credentials(p, nullptr, {"https://mirror.example:443"}, false, &withheld);
  EXPECT_EQ(withheld, "");
  const xfer::Credentials* m = c->find("https://mirror.example:443");
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->bearer.view(), "CANARY-token-7f3") << "the newline systemd keeps is dropped";
  // An origin the job does not fetch from gets nothing (and nothing is read).
  auto none = xferd::with_policy_credentials(p, nullptr, {"https://other.example:443"}, false, nullptr);
  EXPECT_TRUE(none->empty());
  // The job's own credentials for the origin win.
  auto own = std::make_shared<xfer::JobCredentials>();
  xfer::Credentials mine;
  mine.origin = "https://mirror.example:443";
  mine.bearer = xfer::Secret("the caller's");
  own->origins.push_back(std::move(mine));
  auto kept = xferd::with_policy_credentials(p, own, {"https://mirror.example:443"}, false, nullptr);
  ASSERT_EQ(kept->origins.size(), 1u);
  EXPECT_EQ(kept->origins[0].bearer.view(), "the caller's");
}

TEST(JobCredentials, APolicysSecretIsWithheldFromAJobThatBringsItsOwnProxyOrCa) {
  CredentialsDir creds;
  creds.put("mirror-token", "CANARY-token-7f3");
  Policy p = with_token("https://mirror.example");
  auto proxied = std::make_shared<xfer::JobCredentials>();
  proxied->proxy.url = "http://callers-proxy:3128";
  std::string withheld;
  auto c = xferd::with_policy_credentials(p, proxied, {"https://mirror.example:443"}, false, &withheld);
  EXPECT_EQ(c->find("https://mirror.example:443"), nullptr);
  EXPECT_NE(withheld.find("withheld: the job brings its own proxy"), std::string::npos) << withheld;
  EXPECT_EQ(withheld.find("CANARY"), std::string::npos);
  withheld.clear();
  c = xferd::with_policy_credentials(p, nullptr, {"https://mirror.example:443"}, true, &withheld);
  EXPECT_EQ(c->find("https://mirror.example:443"), nullptr);
  EXPECT_NE(withheld.find("its own CA file"), std::string::npos) << withheld;
  // Over plain http a CA file vouches for nothing the proxy could see: the token goes.
  Policy h = with_token("http://mirror.example");
  c = xferd::with_policy_credentials(h, nullptr, {"http://mirror.example:80"}, true, nullptr);
  EXPECT_NE(c->find("http://mirror.example:80"), nullptr);
}

TEST(JobCredentials, AMissingCredentialSaysHowToGiveIt) {
  Policy p = with_token("https://mirror.example");
  unsetenv("CREDENTIALS_DIRECTORY");
  try {
    xferd::with_policy_credentials(p, nullptr, {"https://mirror.example:443"}, false, nullptr);
    FAIL() << "no $CREDENTIALS_DIRECTORY, yet a token";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("LoadCredential=mirror-token:PATH"), std::string::npos) << e.what();
  }
  CredentialsDir creds;  // there, but without the file
  try {
    xferd::systemd_credential("mirror-token");
    FAIL() << "a credential that is not there";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("credential 'mirror-token'"), std::string::npos) << e.what();
  }
}

TEST(JobCredentials, ACaBundleIsBoundedHoldsACertificateAndIsLeftToBeReadAgain) {
  CredentialsDir tmp;
  auto fd_of = [&](const std::string& name, const std::string& text) {
    tmp.put(name, text);
    return open((tmp.dir + "/" + name).c_str(), O_RDONLY | O_CLOEXEC);
  };
  std::string why;
  int good = fd_of("ca.pem", kPem);
  EXPECT_EQ(xferd::read_ca_pem(good, "/home/u/ca.pem", &why), kPem);
  EXPECT_EQ(why, "");
  EXPECT_EQ(lseek(good, 0, SEEK_CUR), 0) << "read again when the job starts";
  close(good);
  int text = fd_of("notes.txt", "just text\n");
  EXPECT_EQ(xferd::read_ca_pem(text, "/home/u/notes.txt", &why), "");
  EXPECT_NE(why.find("holds no PEM certificate"), std::string::npos) << why;
  close(text);
  why.clear();
  int big = fd_of("big.pem", std::string(kPem) + std::string(xferd::kMaxCaBytes, 'A'));
  EXPECT_EQ(xferd::read_ca_pem(big, "/home/u/big.pem", &why), "");
  EXPECT_NE(why.find("is larger than"), std::string::npos) << why;
  close(big);
  // The policy's: none is "", a good one its text, a bad one says which.
  Policy p;
  why.clear();
  EXPECT_EQ(xferd::policy_ca_pem(p, &why), "");
  EXPECT_EQ(why, "");
  p.values["ca_file"] = tmp.dir + "/ca.pem";
  EXPECT_EQ(xferd::policy_ca_pem(p, &why), kPem);
  p.values["ca_file"] = tmp.dir + "/notes.txt";
  EXPECT_EQ(xferd::policy_ca_pem(p, &why), "");
  EXPECT_NE(why.find("policy ca_file"), std::string::npos) << why;
}
