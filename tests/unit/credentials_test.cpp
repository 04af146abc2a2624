// libxfer/engine/credentials.cpp: secrets in memory, netrc, per-origin
// binding and redirect targets; and the URL rules around them (text.cpp's
// shown_url, manifest.cpp's check_url, history.cpp's redact_url,
// safe_open.cpp's make_private_file).
#include "xfer/credentials.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>

#include "xfer/history.h"
#include "xfer/manifest.h"
#include "xfer/safe_open.h"
#include "xfer/text.h"

using namespace xfer;

TEST(Secret, HoldsItsBytesAndCopiesMoveAndWipe) {
  Secret s("token-1");
  EXPECT_EQ(s.view(), "token-1");
  EXPECT_STREQ(s.c_str(), "token-1");
  Secret c = s;
  Secret m = std::move(s);
  EXPECT_TRUE(s.empty());
  EXPECT_EQ(c.view(), "token-1");
  EXPECT_EQ(m.view(), "token-1");
  m = Secret("x");
  EXPECT_EQ(m.view(), "x");
  EXPECT_TRUE(Secret().empty());
  EXPECT_STREQ(Secret().c_str(), "");
  std::string t = "secret";
  wipe(t);
  EXPECT_TRUE(t.empty());
}

TEST(Netrc, ReadsMachinesDefaultQuotesAndMacros) {
  auto e = parse_netrc(
      "machine a.example login alice password \"p w\\\"d\"\n"
      "macdef init\ncd /\nls\n\n"
      "machine b.example\n  login bob\n  account x\n  password pb\n"
      "default login anon password guest\n");
  ASSERT_EQ(e.size(), 3u);
  EXPECT_EQ(e[0].machine, "a.example");
  EXPECT_EQ(e[0].login, "alice");
  EXPECT_EQ(e[0].password.view(), "p w\"d");
  EXPECT_EQ(e[1].login, "bob");
  EXPECT_EQ(e[1].password.view(), "pb");
  EXPECT_TRUE(e[2].is_default);
  EXPECT_EQ(e[2].login, "anon");
}

TEST(Netrc, RefusesWhatItCannotReadWithoutShowingValues) {
  EXPECT_THROW(parse_netrc("login x"), CredentialError);          // before any machine
  EXPECT_THROW(parse_netrc("machine"), CredentialError);          // no host
  EXPECT_THROW(parse_netrc("machine h password \"open"), CredentialError);
  try {
    parse_netrc("machine h login u s3cr3tvalue");
    FAIL() << "an unknown keyword was taken";
  } catch (const CredentialError& e) {
    EXPECT_EQ(std::string(e.what()).find("s3cr3tvalue"), std::string::npos) << e.what();
  }
}

TEST(Netrc, BindsEachOriginToItsOwnHostOnly) {
  auto e = parse_netrc("machine files.example login u password p\nmachine other.example login o password q\n");
  JobCredentials c;
  bind_netrc(c, e, {"https://files.example:443", "http://FILES.example:8080", "https://third.example:443"});
  ASSERT_EQ(c.origins.size(), 2u);
  EXPECT_EQ(c.find("https://files.example:443")->user, "u");
  EXPECT_EQ(c.find("http://files.example:8080")->password.view(), "p");
  EXPECT_EQ(c.find("https://third.example:443"), nullptr);  // no entry, no default: nothing
  EXPECT_EQ(c.find("https://other.example:443"), nullptr);  // not an origin of the job
  // A default entry serves the hosts the file does not name.
  JobCredentials d;
  bind_netrc(d, parse_netrc("default login anon password g"), {"https://x.example:443"});
  ASSERT_NE(d.find("https://x.example:443"), nullptr);
  EXPECT_EQ(d.find("https://x.example:443")->user, "anon");
}

TEST(Credentials, DescribeNamesKindsNeverValues) {
  JobCredentials c;
  Credentials k;
  k.origin = "https://h:443";
  k.bearer = Secret("canary-bearer");
  k.headers.emplace_back("X-Api-Key", Secret("canary-key"));
  c.origins.push_back(std::move(k));
  c.proxy.url = "http://proxy:3128";
  c.proxy.user = "pu";
  c.proxy.password = Secret("canary-proxy");
  std::string d = c.describe();
  EXPECT_NE(d.find("bearer token"), std::string::npos) << d;
  EXPECT_NE(d.find("header X-Api-Key"), std::string::npos) << d;
  EXPECT_NE(d.find("proxy"), std::string::npos) << d;
  EXPECT_EQ(d.find("canary"), std::string::npos) << d;
}

TEST(Redirects, TargetsAreHttpOrHttpsAndNeverDowngradeUnlessAllowed) {
  EXPECT_EQ(redirect_target("http://h/a", "/b", false).url, "http://h/b");
  EXPECT_EQ(redirect_target("https://h/a/b", "c", false).url, "https://h/a/c");
  EXPECT_EQ(redirect_target("http://h/a", "https://o:8443/x", false).url, "https://o:8443/x");
  EXPECT_NE(redirect_target("https://h/a", "http://h/a", false).refused, "");
  EXPECT_EQ(redirect_target("https://h/a", "http://h/a", true).url, "http://h/a");
  EXPECT_NE(redirect_target("http://h/a", "file:///etc/passwd", false).refused, "");
  EXPECT_NE(redirect_target("http://h/a", "ftp://h/a", false).refused, "");
  EXPECT_NE(redirect_target("http://h/a", "http://u:pw@h/a", false).refused, "");
  EXPECT_NE(redirect_target("http://h/a", "http://:pw@h/a", false).refused, "");
}

TEST(UrlRules, AnyUserInformationIsRefused) {
  EXPECT_NE(check_url("http://user:pw@h/a"), "");
  EXPECT_NE(check_url("http://:PASSWORD@h/a"), "");  // empty user name: libcurl sent Basic auth
  EXPECT_NE(check_url("http://user@h/a"), "");
  EXPECT_NE(check_url("http://;opt@h/a"), "");
  EXPECT_EQ(check_url("http://h/a@b"), "");  // '@' in the path is not user information
}

TEST(UrlRules, ShownUrlsHoldNoUserInformationNorQueryValues) {
  EXPECT_EQ(shown_url("http://:PASSWORD@h/a"), "http://***@h/a");
  EXPECT_EQ(shown_url("https://u:p@h:1/a?token=SECRET&flag&x=1#frag"), "https://***@h:1/a?token=***&flag&x=***");
  EXPECT_EQ(shown_url("http://h/a?%3Cweird%3E=v"), "http://h/a?***");
  EXPECT_EQ(shown_url("pw@host/a?k=v"), "***@host/a?k=***");  // no scheme: what precedes an @ may be a password
  EXPECT_EQ(shown_url("http://h/p@q"), "http://h/p@q");
  EXPECT_EQ(shown_url("http://h/a\nforged"), "http://h/a\\nforged");
}

TEST(UrlRules, PostgresPasswordsAreHiddenInEveryForm) {
  EXPECT_EQ(hla::redact_url("postgresql://u:pw@h/db"), "postgresql://u:***@h/db");
  EXPECT_EQ(hla::redact_url("postgresql://u@h/db?password=pw&sslmode=require"),
            "postgresql://u@h/db?password=***&sslmode=require");
  EXPECT_EQ(hla::redact_url("postgres://h/db?sslpassword=k&PASSWORD=pw"), "postgres://h/db?sslpassword=***&PASSWORD=***");
  EXPECT_EQ(hla::redact_url("/var/lib/xferd/history.db"), "/var/lib/xferd/history.db");
}

TEST(PrivateFile, CreatedAndNarrowedToItsOwner) {
  namespace fs = std::filesystem;
  std::string dir = fs::temp_directory_path() / ("xfer-private-" + std::to_string(getpid()));
  fs::create_directories(dir);
  std::string db = dir + "/store.db";
  EXPECT_EQ(make_private_file(db, "store"), 0);  // created
  struct stat st;
  ASSERT_EQ(stat(db.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  chmod(db.c_str(), 0644);
  std::ofstream(db + "-wal") << "x";
  chmod((db + "-wal").c_str(), 0644);
  EXPECT_EQ(make_private_file(db, "store"), 2);  // the file and its -wal
  ASSERT_EQ(stat((db + "-wal").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  fs::create_directory_symlink("/tmp", dir + "/link");
  EXPECT_THROW(make_private_file(dir + "/link", "store"), std::runtime_error);
  fs::remove_all(dir);
}
