// Names a caller controls, text a caller wrote, files a caller planted: each
// check here fails on the code before issue 12 and passes on the code after.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "config.h"
#include "store.h"
#include "xfer/log.h"
#include "xfer/manifest.h"
#include "xfer/part_file.h"
#include "xfer/safe_open.h"
#include "xfer/sha256.h"
#include "xfer/text.h"

namespace fs = std::filesystem;

namespace {

constexpr uid_t kNobody = 65534;

struct Dir {
  Dir() {
    char t[] = "/tmp/xfer-trust-XXXXXX";
    path = mkdtemp(t);
    fd = open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  }
  ~Dir() {
    close(fd);
    fs::remove_all(path);
  }
  std::string at(const std::string& n) const { return path + "/" + n; }
  std::string path;
  int fd = -1;
};

std::string slurp(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// What open_regular says of name, or "" when it opened it.
std::string refusal(const Dir& d, const std::string& name, xfer::FileOwner owner = {}) {
  try {
    int fd = xfer::open_regular(d.fd, name, O_RDONLY, owner);
    if (fd >= 0) close(fd);
    return fd >= 0 ? "" : "absent";
  } catch (const xfer::NameRefused& e) {
    return e.what();
  }
}

}  // namespace

TEST(Printable, EscapesWhatATerminalOrALogWouldActOn) {
  EXPECT_EQ(xfer::printable("plain text, é ü 日本"), "plain text, é ü 日本");
  EXPECT_EQ(xfer::printable("\x1b]0;owned\x07"), "\\x1b]0;owned\\x07");
  EXPECT_EQ(xfer::printable("a\nFAKE LINE"), "a\\nFAKE LINE");
  EXPECT_EQ(xfer::printable("\xc2\x9b" "31m"), "\\u{009b}31m");       // C1 CSI as UTF-8
  EXPECT_EQ(xfer::printable("\xe2\x80\xae" "txt"), "\\u{202e}txt");   // right-to-left override
  EXPECT_EQ(xfer::printable("\xff\xfe"), "\\xff\\xfe");               // not UTF-8
  EXPECT_EQ(xfer::printable(std::string("a\0b", 3)), "a\\x00b");
}

TEST(Printable, ShownIsBounded) {
  EXPECT_EQ(xfer::shown("short"), "short");
  std::string huge(10 << 20, 'x');
  std::string s = xfer::shown(huge);
  EXPECT_EQ(s, std::string(256, 'x') + "... (10485760 bytes)");
  EXPECT_EQ(xfer::shown("\x1b[2J" + huge, 4).substr(0, 10), "\\x1b[2J...");
  EXPECT_EQ(xfer::shown("\xc3\xa9\xc3\xa9", 3), "\xc3\xa9... (4 bytes)");  // never half a character
}

TEST(Printable, EveryLogLineIsEscaped) {
  Dir d;
  std::string file = d.at("log");
  int saved = dup(2);
  int fd = open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  ASSERT_GE(fd, 0);
  dup2(fd, 2);
  xfer::log::to_stderr();
  xfer::log::set_level("info");
  xfer::log::info("policy {} refused", "nope\nFAKE LINE \x1b[2J");
  spdlog::default_logger()->flush();
  dup2(saved, 2);
  close(saved);
  close(fd);
  std::string text = slurp(file);
  EXPECT_NE(text.find("policy nope\\nFAKE LINE \\x1b[2J refused"), std::string::npos) << text;
  EXPECT_EQ(text.find('\x1b'), std::string::npos) << text;
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1) << text;  // one message, one line
}

TEST(OpenRegular, RefusesEverythingButTheOwnersRegularFileWithoutBlocking) {
  Dir d;
  ASSERT_EQ(mkfifo(d.at("fifo").c_str(), 0600), 0);
  fs::create_directory(d.at("dir"));
  fs::create_symlink("/etc/passwd", d.at("link"));
  std::ofstream(d.at("file")) << "x";
  std::ofstream(d.at("theirs")) << "x";
  ASSERT_EQ(chown(d.at("theirs").c_str(), kNobody, kNobody), 0);
  ASSERT_EQ(link(d.at("theirs").c_str(), d.at("hardlink").c_str()), 0);
  int s = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::snprintf(a.sun_path, sizeof a.sun_path, "%s", d.at("sock").c_str());
  ASSERT_EQ(bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);

  auto t0 = std::chrono::steady_clock::now();
  EXPECT_NE(refusal(d, "fifo").find("FIFO"), std::string::npos) << refusal(d, "fifo");
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(1));  // it did not wait for a writer
  EXPECT_NE(refusal(d, "dir").find("directory"), std::string::npos);
  EXPECT_NE(refusal(d, "link").find("symbolic link"), std::string::npos);
  EXPECT_NE(refusal(d, "sock").find("socket"), std::string::npos);
  EXPECT_EQ(refusal(d, "file"), "");
  EXPECT_EQ(refusal(d, "missing"), "absent");
  xfer::FileOwner nobody{kNobody, kNobody};
  EXPECT_NE(refusal(d, "file", nobody).find("belongs to uid 0"), std::string::npos);
  EXPECT_NE(refusal(d, "theirs", nobody).find("hard links"), std::string::npos);  // linked twice
  close(s);
}

TEST(PartFileTrust, AFifoAtTheProgressRecordFailsTheFileAndDoesNotBlock) {
  Dir d;
  ASSERT_EQ(mkfifo(d.at("a.bin.part.progress").c_str(), 0600), 0);
  auto t0 = std::chrono::steady_clock::now();
  try {
    xfer::PartFile p(d.fd, "a.bin", "http://h/a.bin", 10, "");
    FAIL() << "opened";
  } catch (const xfer::NameRefused& e) {
    EXPECT_NE(std::string(e.what()).find("FIFO"), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(1));
}

TEST(PartFileTrust, OneWriterPerName) {
  Dir d;
  xfer::PartFile first(d.fd, "a.bin", "http://one/a.bin", 8, "");
  first.write(0, "11111111", 8);
  first.record_written();
  try {
    xfer::PartFile second(d.fd, "a.bin", "http://two/a.bin", 8, "");
    FAIL() << "a second writer opened a.bin.part";
  } catch (const xfer::NameRefused& e) {
    EXPECT_NE(std::string(e.what()).find("being written by another transfer"), std::string::npos) << e.what();
  }
  // The first writer's bytes and record are untouched by the attempt.
  EXPECT_EQ(slurp(d.at("a.bin.part")), "11111111");
  first.finish();
  EXPECT_EQ(slurp(d.at("a.bin")), "11111111");
}

TEST(PartFileTrust, ARecordForAnotherSha256IsNotResumed) {
  Dir d;
  std::string sha_a(64, 'a'), sha_b(64, 'b');
  {
    xfer::PartFile p(d.fd, "a.bin", "http://h/a.bin", 8, sha_a);
    p.write(0, "xxxx", 4);
    p.checkpoint();
    p.close_for_resume();
  }
  xfer::PartFile again(d.fd, "a.bin", "http://h/a.bin", 8, sha_b);
  EXPECT_EQ(again.resumed_bytes(), 0u);
}

TEST(PartFileTrust, ProgressRecordParserRefusesWhatXferdNeverWrites) {
  EXPECT_THROW(xfer::parse_progress_record("hello"), std::invalid_argument);
  EXPECT_THROW(xfer::parse_progress_record("xferd-progress 2\nurl x\n"), std::invalid_argument);  // no size
  EXPECT_THROW(xfer::parse_progress_record("xferd-progress 2\nsize 10\nsynced 5-1\n"), std::invalid_argument);
  std::string huge = "xferd-progress 2\nsize 10\nwritten ";
  for (int i = 0; i < 70000; ++i) huge += std::to_string(i * 4) + "-" + std::to_string(i * 4 + 1) + ",";
  huge.pop_back();
  EXPECT_THROW(xfer::parse_progress_record(huge), std::invalid_argument);  // more ranges than a job ever records
  xfer::ProgressRecord r =
      xfer::parse_progress_record("xferd-progress 2\nurl http://h/a\nsize 10\nsha256 -\nboot b\nsynced 0-4\nwritten 0-6\n");
  EXPECT_EQ(r.url, "http://h/a");
  EXPECT_EQ(r.size, 10u);
  EXPECT_EQ(r.sha256, "");
  EXPECT_EQ(r.written.bytes(), 6u);
  EXPECT_EQ(r.validator, "") << "a record from before validators names no version";
  // The version its bytes are of survives the round trip (issue 53).
  r.validator = "etag \"5f1e-1a\"";
  EXPECT_EQ(xfer::parse_progress_record(xfer::to_text(r)).validator, r.validator);
}

TEST(ManifestTrust, AHashInsideAFieldIsPartOfIt) {
  std::string sha(64, 'c');
  xfer::Manifest m = xfer::parse_manifest("http://h/a.bin#frag 10 sha256:" + sha + "  # a comment\n", "t");
  ASSERT_EQ(m.entries.size(), 1u);
  EXPECT_EQ(m.entries[0].url, "http://h/a.bin#frag");
  EXPECT_EQ(m.entries[0].size, 10u);   // before: cut at '#', size and sha256 gone
  EXPECT_EQ(m.entries[0].sha256, sha);
  EXPECT_EQ(m.entries[0].name, "a.bin");
  EXPECT_EQ(xfer::parse_manifest(xfer::to_text(m), "again").entries[0].sha256, sha);  // round trip
}

TEST(ManifestTrust, EntriesAreDataNotText) {
  xfer::ManifestBuilder b("entries");
  EXPECT_FALSE(b.add("#http://h/a.bin", 10, "", 1));  // not a comment: a bad URL
  EXPECT_FALSE(b.add("http://h/b.bin\nhttp://h/c.bin", 10, "", 2));
  EXPECT_TRUE(b.add("http://h/d.bin#x", 10, std::string(64, 'd'), 3));
  try {
    b.take();
    FAIL() << "accepted";
  } catch (const xfer::ManifestError& e) {
    EXPECT_EQ(e.problems().size(), 2u) << e.what();
    EXPECT_EQ(std::string(e.what()).find('\n', std::string(e.what()).find("b.bin")), std::string::npos)
        << "the URL's newline reached the message raw: " << e.what();
  }
}

TEST(ConfigTrust, NanAndDirectoriesAreRefused) {
  Dir d;
  std::ofstream(d.at("nan.conf")) << "[network]\nbandwidth_mbps = nan\n";
  try {
    xferd::load_config(d.at("nan.conf"), d.at("none"));
    FAIL() << "nan accepted";
  } catch (const xferd::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("finite"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("nan.conf:2"), std::string::npos) << e.what();
  }
  fs::create_directory(d.at("conf-dir"));
  try {
    xferd::load_config(d.at("conf-dir"), d.at("none"));
    FAIL() << "a directory read as the configuration";
  } catch (const xferd::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("is a directory"), std::string::npos) << e.what();
  }
  ASSERT_EQ(mkfifo(d.at("fifo.conf").c_str(), 0600), 0);
  EXPECT_THROW(xferd::load_config(d.at("fifo.conf"), d.at("none")), xferd::ConfigError);  // and no wait for a writer
  // A NUL in a path: the daemon would cut it where it hands it to the kernel.
  for (const char* text : {"[kernel]\nstate_file = \"/var/lib/xferd/ks\\u0000/etc/x\"\n",
                           "[daemon]\nstate_dir = \"/var/lib/xferd\\u0000/tmp\"\n"}) {
    std::ofstream(d.at("nul.conf")) << text;
    try {
      xferd::load_config(d.at("nul.conf"), d.at("none"));
      FAIL() << "a NUL accepted: " << text;
    } catch (const xferd::ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("NUL byte"), std::string::npos) << e.what();
    }
  }
}

// Files xferd trusts: root's (or this user's), not writable by others, no
// symlink at the name; a sticky directory above (/tmp) is allowed.
TEST(TrustedPath, RootsAndPrivateOrRefusedWithTheReason) {
  Dir d;
  chmod(d.path.c_str(), 0755);
  auto refusal_of = [](const std::string& p, xfer::Trusted k = xfer::Trusted::File) -> std::string {
    try {
      xfer::require_trusted(p, k, "table");
      return "";
    } catch (const xfer::UntrustedPath& e) {
      return e.what();
    }
  };
  std::string f = d.at("t.json");
  std::ofstream(f) << "{}";
  chmod(f.c_str(), 0644);
  EXPECT_EQ(refusal_of(f), "");
  EXPECT_EQ(refusal_of(d.at("absent")), "");  // created by xferd, in a trusted directory
  EXPECT_EQ(refusal_of(d.path, xfer::Trusted::Directory), "");
  chmod(f.c_str(), 0664);
  EXPECT_NE(refusal_of(f).find(f + ": it is writable by its group"), std::string::npos) << refusal_of(f);
  chmod(f.c_str(), 0644);
  ASSERT_EQ(chown(f.c_str(), kNobody, kNobody), 0);
  EXPECT_NE(refusal_of(f).find("it belongs to uid 65534, not to root"), std::string::npos) << refusal_of(f);
  EXPECT_THROW(xfer::read_trusted_file(f, 100, "table"), xfer::UntrustedPath);
  ASSERT_EQ(chown(f.c_str(), 0, 0), 0);
  EXPECT_EQ(xfer::read_trusted_file(f, 100, "table"), "{}");
  ASSERT_EQ(symlink(f.c_str(), d.at("link").c_str()), 0);
  EXPECT_NE(refusal_of(d.at("link")).find("is a symbolic link"), std::string::npos);
  EXPECT_THROW(xfer::read_trusted_file(d.at("link"), 100, "table"), xfer::UntrustedPath);
  // A directory above that others may write (and that is not sticky).
  std::string open_dir = d.at("open");
  mkdir(open_dir.c_str(), 0777);
  chmod(open_dir.c_str(), 0777);
  std::ofstream(open_dir + "/t.json") << "{}";
  EXPECT_NE(refusal_of(open_dir + "/t.json").find(open_dir + " is writable by every user"), std::string::npos)
      << refusal_of(open_dir + "/t.json");
  chmod(open_dir.c_str(), 01777);  // sticky, like /tmp: allowed
  EXPECT_EQ(refusal_of(open_dir + "/t.json"), "");
  // A symlinked directory above is followed only when root owns the link.
  std::string sub = d.at("sub");
  mkdir(sub.c_str(), 0755);
  std::ofstream(sub + "/t.json") << "{}";
  ASSERT_EQ(symlink(sub.c_str(), d.at("via").c_str()), 0);
  EXPECT_EQ(refusal_of(d.at("via") + "/t.json"), "");
  ASSERT_EQ(lchown(d.at("via").c_str(), kNobody, kNobody), 0);
  EXPECT_NE(refusal_of(d.at("via") + "/t.json").find("is a symbolic link that root does not own"), std::string::npos);
  EXPECT_NE(refusal_of("relative/t.json").find("not an absolute path"), std::string::npos);
}

TEST(StoreTrust, ADamagedStoreIsNamedAndLeftAsItIs) {
  Dir d;
  std::string db = d.at("xferd.db");
  std::string junk(8192, 'J');
  std::ofstream(db) << junk;
  try {
    xferd::Store s(db);
    FAIL() << "opened a damaged store";
  } catch (const xferd::StoreError& e) {
    std::string w = e.what();
    EXPECT_NE(w.find(db), std::string::npos) << w;
    EXPECT_NE(w.find("damaged"), std::string::npos) << w;
    EXPECT_NE(w.find(".recover"), std::string::npos) << w;
  }
  EXPECT_EQ(slurp(db), junk);  // nothing dropped, nothing rewritten
}

TEST(StoreTrust, ALockedStoreIsNamed) {
  Dir d;
  std::string db = d.at("xferd.db");
  { xferd::Store s(db); }
  sqlite3* other = nullptr;
  ASSERT_EQ(sqlite3_open(db.c_str(), &other), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(other, "PRAGMA locking_mode=EXCLUSIVE; PRAGMA journal_mode=DELETE; BEGIN EXCLUSIVE;", nullptr,
                         nullptr, nullptr),
            SQLITE_OK);
  try {
    xferd::Store s(db);
    FAIL() << "opened a store another process holds";
  } catch (const xferd::StoreError& e) {
    EXPECT_NE(std::string(e.what()).find("locked by another process"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(db), std::string::npos) << e.what();
  }
  sqlite3_exec(other, "COMMIT", nullptr, nullptr, nullptr);
  sqlite3_close(other);
}
