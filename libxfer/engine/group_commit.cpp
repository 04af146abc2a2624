#include "xfer/group_commit.h"
#include "xfer/faults.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "xfer/boot.h"
#include "xfer/log.h"

namespace xfer {

bool sync_batch_by_fs(const std::vector<CommitPlan>& plans) {
  if (plans.size() < kSyncfsMinFiles) return false;
  uint64_t bytes = 0;
  dev_t dev = 0;
  for (const auto& p : plans) {
    struct stat st;
    if (fstat(p.fd, &st) != 0) return false;
    if (&p != &plans.front() && st.st_dev != dev) return false;
    dev = st.st_dev;
    bytes += uint64_t(st.st_size) - std::min<uint64_t>(uint64_t(st.st_size), p.direct_bytes);
  }
  return dirty_bytes() <= 2 * bytes + kSyncfsSlackBytes;
}

std::vector<CommitOutcome> commit_files(std::vector<CommitPlan>& plans) {
  std::vector<CommitOutcome> out(plans.size());
  auto fail = [&](size_t i, int err, const std::string& what) {
    if (!out[i].err) out[i].err = err ? err : EIO, out[i].what = what;  // `renamed` stays as it is
  };
  // Many files at once, and little else waiting to be written on the whole
  // machine: one syncfs of their file system writes them all, with one
  // journal commit (see sync_batch_by_fs). If it reports an error, the
  // fdatasyncs below say which file it was.
  const bool by_fs = sync_batch_by_fs(plans);
  bool synced = false;
  if (by_fs) {
    synced = !fault("xfer/io/syncfs") && syncfs(plans.front().fd) == 0;
    if (!synced) log::warn("syncfs: {}; the batch's {} files are synced one by one", std::strerror(errno), plans.size());
  }
  if (!synced) {
    // Writeback of every file at once, then the waits: the batch's I/O overlaps.
    if (plans.size() > 1)
      for (auto& p : plans) sync_file_range(p.fd, 0, 0, SYNC_FILE_RANGE_WRITE);
    for (size_t i = 0; i < plans.size(); ++i)
      if (fault("xfer/io/fdatasync") || fdatasync(plans[i].fd) != 0) fail(i, errno, "sync " + plans[i].part);
  }
  // Each descriptor stays open until its file is renamed and its record gone:
  // it holds the name's lock (flock, part_file.h), and a next run of the job
  // that took the lock before the rename would open the file about to leave
  // NAME.part for the final name and write (or truncate) it there.
  auto done_with = [&](CommitPlan& p) {
    ::close(p.fd);
    p.fd = -1;
  };
  std::vector<int> dirs;
  for (size_t i = 0; i < plans.size(); ++i) {
    auto& p = plans[i];
    if (out[i].err) {
      done_with(p);
      continue;
    }
    if (fault("xfer/io/renameat2") ||
        renameat2(p.dir_fd, p.part.c_str(), p.dir_fd, p.final_name.c_str(), RENAME_NOREPLACE) != 0) {
      int err = errno;
      fail(i, err, "rename " + p.part + " to " + p.final_name +
                       (err == EEXIST ? ": a file of that name appeared meanwhile; kept " + p.part : std::string()));
      done_with(p);
      continue;
    }
    out[i].renamed = true;
    if (!p.record.empty()) unlinkat(p.dir_fd, p.record.c_str(), 0);
    done_with(p);
    if (std::find(dirs.begin(), dirs.end(), p.dir_fd) == dirs.end()) dirs.push_back(p.dir_fd);
  }
  for (int d : dirs) {
    if (!fault("xfer/io/fsync") && fsync(d) == 0) continue;
    int err = errno;
    for (size_t i = 0; i < plans.size(); ++i)
      if (plans[i].dir_fd == d) fail(i, err, "sync destination directory");
  }
  return out;
}

}  // namespace xfer
