// libxfer/cpu/journal.cpp: the kernel-state journal acts only on CPU knobs
// under its root, and a file that is not a journal is left as it is.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "xfer/kernel.h"

namespace fs = std::filesystem;

// (Not in an anonymous namespace: gtest derives each test from it.)
struct JournalDir : ::testing::Test {
  void SetUp() override {
    char t[] = "/tmp/xfer-journal-XXXXXX";
    dir = mkdtemp(t);
    root = dir + "/cpu";
    fs::create_directories(root + "/cpu1");
    std::ofstream(root + "/cpu1/online") << "1\n";
    state = dir + "/kernel-state";
  }
  void TearDown() override { fs::remove_all(dir); }
  std::string read(const std::string& p) {
    std::ifstream f(p);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
  }
  std::string dir, root, state;
};

TEST_F(JournalDir, AFileThatIsNotAJournalIsLeftAsItIs) {
  std::ofstream(state) << "my notes, not a journal";
  EXPECT_THROW(xfer::KernelJournal j(state, root), xfer::KernelStateError);
  EXPECT_THROW(xfer::KernelJournal::restore_leftover(state, root), xfer::KernelStateError);
  EXPECT_EQ(read(state), "my notes, not a journal");
  std::ofstream(state) << std::string(100000, '[');  // deep: refused before parsing
  EXPECT_THROW(xfer::KernelJournal j(state, root), xfer::KernelStateError);
  EXPECT_EQ(fs::file_size(state), 100000u);
}

TEST_F(JournalDir, OnlyKnobsUnderTheRootAreWrittenBack) {
  std::string victim = dir + "/victim";
  std::ofstream(victim) << "untouched";
  std::ofstream(root + "/cpu1/online") << "0";
  std::ofstream(state) << R"({"pid": 1, "entries": [[")" << victim << R"(", "x"], [")" << root << R"(/../victim", "x"], [")"
                       << root << R"(/cpu1/online", "1"], [")" << root << R"(/cpu1/online2", "a\nb"]]})";
  EXPECT_TRUE(xfer::KernelJournal::restore_leftover(state, root));
  EXPECT_EQ(read(victim), "untouched");
  EXPECT_EQ(read(root + "/cpu1/online"), "1");  // the knob was restored
  EXPECT_FALSE(fs::exists(state));
}

TEST_F(JournalDir, RecordRefusesWhatIsNotAKnob) {
  xfer::KernelJournal j(state, root);
  std::string other = dir + "/other";
  std::ofstream(other) << "1";
  EXPECT_THROW(j.record(other), xfer::KernelStateError);
  EXPECT_NO_THROW(j.record(root + "/cpu1/online"));
}

TEST_F(JournalDir, AJournalOthersMayWriteIsNotUsed) {
  std::ofstream(state) << R"({"pid": 1, "entries": []})";
  chmod(state.c_str(), 0666);
  try {
    xfer::KernelJournal j(state, root);
    FAIL() << "accepted";
  } catch (const xfer::KernelStateError& e) {
    EXPECT_NE(std::string(e.what()).find("is writable by every user"), std::string::npos) << e.what();
  }
  chmod(state.c_str(), 0600);
  ASSERT_EQ(chown(state.c_str(), 65534, 65534), 0);
  EXPECT_THROW(xfer::KernelJournal j(state, root), xfer::KernelStateError);
}
