// Fault injection points (libfiu) at the engine's own system calls on its
// files: the tests make each fail at random (ENOSPC, EIO, EINTR) and check
// that nothing wrong reaches a final name, nothing is lost, and no progress
// record claims bytes its file does not hold (tests/integration/faults_test.cpp).
//
// A point fires only in a build with XFER_FAULTS (the sanitizer build the
// suite runs) and only when a run enables it, by name, through fiu-run:
//   fiu-run -c "enable_random name=xfer/io/pwrite,probability=0.05,failinfo=28" xferctl run ...
// (failinfo: the errno; none: EIO). Elsewhere a point is a constant 0.
// libfiu's own POSIX preload (fiu-run -x) would fail every call of a name in
// the process, libcurl's sockets and sd-event's descriptors included, and it
// has no openat, renameat2, syncfs or fallocate, nor a way into io_uring:
// these points fail the engine's file I/O alone, each call by its name.
//   xfer/io/openat      open and create in the destination (safe_open)
//   xfer/io/pwrite      a .part's synchronous writes
//   xfer/io/async_write a direct write's completion (io_uring, Linux AIO)
//   xfer/io/io_uring    io_uring refused at the probe: Linux AIO is used
//   xfer/io/write       a progress record's write
//   xfer/io/rename      a progress record's rename into place
//   xfer/io/fdatasync   a .part's or a record's data sync
//   xfer/io/syncfs      a group commit's sync of its file system
//   xfer/io/fsync       a group commit's sync of the directory
//   xfer/io/renameat2   a group commit's rename to the final name
//   xfer/io/fallocate   a .part's space reserved
//   xfer/io/ftruncate   a .part emptied (a reset, an unusable record)
#pragma once

#include <cstddef>  // NULL, which fiu-local.h's points are without XFER_FAULTS

#ifdef XFER_FAULTS
#define FIU_ENABLE 1
#endif
#include <fiu-local.h>

#include <cerrno>

namespace xfer {

// The errno the point `name` fails with now, 0 when it does not fire.
inline int injected_fault([[maybe_unused]] const char* name) {
  if (!fiu_fail(name)) return 0;
  long e = reinterpret_cast<long>(static_cast<void*>(fiu_failinfo()));
  return e > 0 ? int(e) : EIO;
}

// True, with errno set, when the point fires: `fault("xfer/io/pwrite") ? -1 : pwrite(...)`.
inline bool fault(const char* name) {
  int e = injected_fault(name);
  if (e) errno = e;
  return e != 0;
}

}  // namespace xfer
