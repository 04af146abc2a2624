// protocol/credentials_args.cpp: what a caller may give as credentials, and
// how they bind to the job's origins. Refusals name the key, never a value.
#include "credentials_args.h"

#include <fcntl.h>
#include <sys/socket.h>
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
    if (f[0].key != canary) {
      EXPECT_EQ(why.find(canary), std::string::npos) << why;
    }
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

namespace {

std::string descriptor_refusal(int fd) {
  try {
    read_descriptor(fd, "bearer_token");
  } catch (const Refusal& r) {
    return r.what();
  }
  return "";
}

}  // namespace

// Issue 53, finding 3: a descriptor the caller holds the other end of never
// makes the daemon's loop wait, whatever the caller does with it.
TEST(CredentialDescriptor, ASocketWithAHighReceiveMarkIsRefusedAtOnce) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  int mark = 16384;
  ASSERT_EQ(setsockopt(sv[0], SOL_SOCKET, SO_RCVLOWAT, &mark, sizeof mark), 0);
  ASSERT_EQ(write(sv[1], "t", 1), 1);  // the writer stays open: one byte, never the mark
  EXPECT_NE(descriptor_refusal(sv[0]).find("no end ready"), std::string::npos);
  // Its writer done, the same socket gives its whole value.
  ASSERT_EQ(write(sv[1], "ok\n", 3), 3);
  shutdown(sv[1], SHUT_WR);
  int sv2[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv2), 0);
  ASSERT_EQ(setsockopt(sv2[0], SOL_SOCKET, SO_RCVLOWAT, &mark, sizeof mark), 0);
  ASSERT_EQ(write(sv2[1], "tok\n", 4), 4);
  shutdown(sv2[1], SHUT_WR);
  EXPECT_EQ(read_descriptor(sv2[0], "bearer_token"), "tok\n");
  for (int fd : {sv[0], sv[1], sv2[0], sv2[1]}) close(fd);
}

TEST(CredentialDescriptor, APipeStillOpenOrDrainedIsRefusedAndTheCallersFlagsStay) {
  int p[2];
  ASSERT_EQ(pipe2(p, O_CLOEXEC), 0);
  EXPECT_NE(descriptor_refusal(p[0]).find("no end ready"), std::string::npos);  // empty, writer open
  ASSERT_EQ(write(p[1], "tok", 3), 3);
  EXPECT_NE(descriptor_refusal(p[0]).find("no end ready"), std::string::npos);  // read, then nothing more
  EXPECT_EQ(fcntl(p[0], F_GETFL) & O_NONBLOCK, 0);  // the caller's description is left as it was
  ASSERT_EQ(write(p[1], "tok\n", 4), 4);
  close(p[1]);
  EXPECT_EQ(read_descriptor(p[0], "bearer_token"), "tok\n");
  close(p[0]);
}

TEST(CredentialDescriptor, AFileIsReadWholeFromItsStartAndADeviceRefused) {
  char path[] = "/tmp/xfer-cred-XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  unlink(path);
  ASSERT_EQ(write(fd, "secret\n", 7), 7);  // the offset is now at the end: pread reads from 0
  EXPECT_EQ(read_descriptor(fd, "password"), "secret\n");
  close(fd);
  int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
  EXPECT_NE(descriptor_refusal(null).find("not a file or a pipe"), std::string::npos);
  close(null);
}
