#include "xfer/manifest.h"

#include <gtest/gtest.h>

using xfer::ManifestError;
using xfer::parse_manifest;

TEST(Manifest, ParsesUrlSizeAndHash) {
  std::string sha(64, 'a');
  auto m = parse_manifest("# a comment\n\nhttp://h/a.bin 123 sha256:" + sha + "\nhttps://h:8443/d/b%20c.txt\r\n"
                          "http://h/x  sha256:" + std::string(64, 'B') + "   9  # trailing comment\n",
                          "m.txt");
  ASSERT_EQ(m.entries.size(), 3u);
  EXPECT_EQ(m.entries[0].url, "http://h/a.bin");
  EXPECT_EQ(*m.entries[0].size, 123u);
  EXPECT_EQ(m.entries[0].sha256, sha);
  EXPECT_EQ(m.entries[0].line, 3);
  EXPECT_EQ(m.entries[1].name, "b c.txt");  // percent-decoded
  EXPECT_FALSE(m.entries[1].size.has_value());
  EXPECT_EQ(m.entries[2].sha256, std::string(64, 'b'));  // lower-cased
  EXPECT_EQ(*m.entries[2].size, 9u);
}

// Every malformed line is reported with its line number, all at once.
TEST(Manifest, MalformedLinesNameTheirLine) {
  std::string text =
      "http://h/ok 1\n"                   // 1 fine
      "ftp://h/a 1\n"                     // 2 scheme
      "http://h/b 12x\n"                  // 3 size
      "http://h/c sha256:abc\n"           // 4 short hash
      "http://h/d 1 2\n"                  // 5 size twice
      "http://h/e 1 sha256:" + std::string(64, '0') + " extra\n"  // 6 too many fields
      "http://h/dir/\n"                   // 7 no file name
      "http://h/%2e%2e\n"                 // 8 ".."
      "http://h/ok 5\n"                   // 9 duplicate name
      "file:///etc/passwd\n"              // 10
      "http://h/a%2fb\n"                  // 11 encoded slash
      "http://h/x.part\n";                // 12 engine suffix
  try {
    parse_manifest(text, "bad.txt");
    FAIL() << "no error";
  } catch (const ManifestError& e) {
    const auto& p = e.problems();
    ASSERT_EQ(p.size(), 11u) << e.what();
    EXPECT_NE(p[0].find("bad.txt:2: scheme 'ftp' not allowed"), std::string::npos) << p[0];
    EXPECT_NE(p[1].find("bad.txt:3:"), std::string::npos);
    EXPECT_NE(p[1].find("'12x'"), std::string::npos);
    EXPECT_NE(p[2].find("bad.txt:4: sha256 must be 64 hex digits"), std::string::npos);
    EXPECT_NE(p[3].find("bad.txt:5: size given twice"), std::string::npos);
    EXPECT_NE(p[4].find("bad.txt:6: expected 'URL [SIZE] [sha256:HEX]'"), std::string::npos);
    EXPECT_NE(p[5].find("bad.txt:7: URL path ends in '/'"), std::string::npos);
    EXPECT_NE(p[6].find("bad.txt:8: file name '..' not allowed"), std::string::npos);
    EXPECT_NE(p[7].find("bad.txt:9: file name 'ok' is already used by line 1"), std::string::npos);
    EXPECT_NE(p[8].find("bad.txt:10: scheme 'file' not allowed"), std::string::npos);
    EXPECT_NE(p[9].find("bad.txt:11: decoded file name contains a path separator"), std::string::npos);
    EXPECT_NE(p[10].find("bad.txt:12:"), std::string::npos);
  }
}

TEST(Manifest, RejectsEmptyAndHostileInput) {
  EXPECT_THROW(parse_manifest("# nothing\n\n", "e"), ManifestError);
  EXPECT_THROW(parse_manifest(std::string("http://h/a\0b 1\n", 14), "nul"), ManifestError);
  EXPECT_THROW(parse_manifest("http://user:pw@h/a\n", "cred"), ManifestError);
  EXPECT_THROW(parse_manifest("http:///a\n", "nohost"), ManifestError);
  EXPECT_THROW(parse_manifest("h/a\n", "noscheme"), ManifestError);
  EXPECT_THROW(parse_manifest("http://h/" + std::string(300, 'x') + "\n", "long"), ManifestError);
}

TEST(Manifest, CheckUrlAllowsOnlyHttpAndHttps) {
  EXPECT_EQ(xfer::check_url("http://127.0.0.1:8080/a"), "");
  EXPECT_EQ(xfer::check_url("HTTPS://example.org/a"), "");
  EXPECT_NE(xfer::check_url("gopher://h/a"), "");
  EXPECT_NE(xfer::check_url("http://h/a b"), "");
}

TEST(Manifest, UrlOriginIsSchemeHostAndExplicitPort) {
  EXPECT_EQ(xfer::url_origin("http://127.0.0.1:8080/a/b"), "http://127.0.0.1:8080");
  EXPECT_EQ(xfer::url_origin("https://Example.org/x"), "https://Example.org:443");
  EXPECT_EQ(xfer::url_origin("http://h/x"), "http://h:80");
  EXPECT_EQ(xfer::url_origin("not a url"), "");
}
