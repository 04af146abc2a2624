// The group commit: verified .part files made durable together and renamed
// to their final names (the engine gathers them; part_file.h makes a plan
// for each). Safe off the loop.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace xfer {

// One file to commit.
struct CommitPlan {
  int fd = -1;  // a descriptor of its own (commit_files closes it)
  int dir_fd = -1;
  std::string part, final_name, record;
  uint64_t direct_bytes = 0;  // of its bytes, written with O_DIRECT (none of them dirty in the page cache)
};

// What became of one file of commit_files(): 0, or the errno that stopped
// it (EEXIST: the final name was taken meanwhile; the .part is kept), and
// the step that failed.
struct CommitOutcome {
  int err = 0;
  std::string what;
  bool renamed = false;  // at its final name (err then says the directory's sync failed after)
};

// Every file's data and size made durable (writeback started for all, then
// fdatasync each; or one syncfs, see sync_batch_by_fs), then each renamed to
// its final name (never over an existing one) and its record dropped, then
// each directory synced once (the renames durable). Nothing is at a final
// name before its bytes are on disk. One sync of the directory, and inode
// blocks shared by the batch written once, instead of two fsyncs a file.
// Closes the plans' descriptors.
std::vector<CommitOutcome> commit_files(std::vector<CommitPlan>& plans);

// Whether a batch is made durable by one syncfs of its file system instead
// of an fdatasync per file: at least kSyncfsMinFiles files, all on one file
// system, and no more dirty data on the whole machine than twice what the
// batch may have in the page cache (its size less what went with O_DIRECT)
// plus kSyncfsSlackBytes (so the sync writes little that is not the
// batch's). On ext4 an fdatasync per file writes each file back from the
// caller and waits for a journal commit per call; syncfs writes them back
// together and commits once. Measured on wan-tls html (1000 files of ~100 KB,
// a journaled ext4): fdatasync, fsync and rename were 97 of the engine's 617
// CPU samples.
constexpr size_t kSyncfsMinFiles = 4;
constexpr uint64_t kSyncfsSlackBytes = 64ull << 20;
bool sync_batch_by_fs(const std::vector<CommitPlan>& plans);

}  // namespace xfer
