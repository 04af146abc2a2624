// daemon/credentials_args.cpp: what a caller may give as credentials, and
// how they bind to the job's origins. Refusals name the key, never a value.
#include "credentials_args.h"

#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

using namespace xferd;

namespace {

CredentialArgs from(std::vector<CredentialField> f) { return credentials_from_fields(f); }

std::string refusal(std::vector<CredentialField> f) {
  try {
    from(std::move(f));
  } catch (const Refusal& r) {
    return r.what();
  }
  return "";
}

}  // namespace

TEST(CredentialArgs, EachKindIsTaken) {
  CredentialArgs a = from({{"bearer_token", 's', "tok\n"}, {"headers", 's', "X-Api-Key: k1\n# note\nX-Other:  v2\r\n"}});
  EXPECT_EQ(a.creds.bearer.view(), "tok");  // the file's newline is not the token's
  ASSERT_EQ(a.creds.headers.size(), 2u);
  EXPECT_EQ(a.creds.headers[1].first, "X-Other");
  EXPECT_EQ(a.creds.headers[1].second.view(), "v2");
  CredentialArgs b = from({{"user", 's', "u"}, {"password", 's', "p"}, {"auth", 's', "digest"}});
  EXPECT_EQ(b.creds.auth, xfer::AuthKind::Digest);
  CredentialArgs s = from({{"aws_sigv4", 's', "aws:amz:eu-west-1:s3"}, {"aws_keys", 's', "AKID:SECRET\n"}});
  EXPECT_EQ(s.creds.user, "AKID");
  EXPECT_EQ(s.creds.password.view(), "SECRET");
  CredentialArgs p = from({{"proxy", 's', "http://127.0.0.1:3128"}, {"proxy_user", 's', "pu"}, {"proxy_password", 's', "pp"}});
  EXPECT_EQ(p.proxy.password.view(), "pp");
  EXPECT_TRUE(from({{"allow_downgrade", 'b', "1"}}).allow_downgrade);
}

TEST(CredentialArgs, RefusalsNameTheKeyNeverTheValue) {
  const std::string canary = "xfercanary42";
  for (const auto& f : std::vector<std::vector<CredentialField>>{
           {{"bearer_token", 's', canary + "\nsecond"}},
           {{"headers", 's', "Host: " + canary}},
           {{"headers", 's', canary}},
           {{"headers", 's', "X-K: a\x01" + canary}},
           {{"user", 's', "a:" + canary}},
           {{"password", 's', canary}},  // a password without a user... is taken (user ""), checked below
           {{"auth", 's', "ntlm"}},
           {{"client_cert", 's', canary}},
           {{"client_cert", 's', "-----BEGIN CERTIFICATE-----\n"},
            {"client_key", 's', "-----BEGIN ENCRYPTED PRIVATE KEY-----\n" + canary}},
           {{"netrc", 's', "machine h login u " + canary}},
           {{"aws_keys", 's', canary}},
           {{"aws_sigv4", 's', "aws:amz:r:s"}},
           {{"proxy", 's', "http://u:" + canary + "@p:1"}},
           {{"proxy_password", 's', canary}},
           {{"bearer_token", 's', "t"}, {"password", 's', canary}, {"user", 's', "u"}},
           {{canary, 's', "v"}},
       }) {
    std::string why = refusal(f);
    if (f.size() == 1 && f[0].key == "password") continue;
    EXPECT_NE(why, "") << f[0].key;
    // A key the daemon does not know is echoed (bounded), a value never.
    if (f[0].key != canary) EXPECT_EQ(why.find(canary), std::string::npos) << why;
  }
}

TEST(CredentialArgs, BindToTheJobsOriginsOnly) {
  auto one = bind_credentials(from({{"bearer_token", 's', "t"}}), {"https://h:443"});
  ASSERT_NE(one->find("https://h:443"), nullptr);
  EXPECT_THROW(bind_credentials(from({{"bearer_token", 's', "t"}}), {"https://h:443", "https://g:443"}), Refusal);
  auto chosen = bind_credentials(from({{"bearer_token", 's', "t"}, {"origin", 's', "https://g/any/path"}}),
                                 {"https://h:443", "https://g:443"});
  EXPECT_EQ(chosen->find("https://h:443"), nullptr);
  EXPECT_NE(chosen->find("https://g:443"), nullptr);
  EXPECT_THROW(bind_credentials(from({{"bearer_token", 's', "t"}, {"origin", 's', "https://evil/"}}), {"https://h:443"}),
               Refusal);
  auto netrc = bind_credentials(from({{"netrc", 's', "machine g login u password p"}}), {"https://h:443", "https://g:443"});
  EXPECT_EQ(netrc->find("https://h:443"), nullptr);
  EXPECT_NE(netrc->find("https://g:443"), nullptr);
  EXPECT_THROW(bind_credentials(from({{"netrc", 's', "machine elsewhere login u password p"}}), {"https://h:443"}),
               Refusal);
}
