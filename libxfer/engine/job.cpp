// A job's life: check the destination, discover, partition, let the tuner
// choose params, transfer, re-tune every interval, checkpoint progress,
// verify and rename each file, report.
#include <sys/resource.h>
#include <fcntl.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <fstream>

#include "job_impl.h"
#include "xfer/log.h"
#include "xfer/partition.h"
#include "xfer/sha256.h"
#include "xfer/text.h"

namespace xfer {

uint64_t backoff_us(int failures);

namespace {

// Largest TCP receive buffer the kernel grants (bufSize of the papers).
uint64_t tcp_rmem_max() {
  std::ifstream f("/proc/sys/net/ipv4/tcp_rmem");
  uint64_t lo = 0, def = 0, hi = 0;
  if (f >> lo >> def >> hi && hi > 0) return hi;
  return 6u << 20;
}

double to_s(uint64_t us) { return double(us) / 1e6; }

}  // namespace

const char* to_string(JobState s) {
  switch (s) {
    case JobState::Queued: return "queued";
    case JobState::Discovering: return "discovering";
    case JobState::Running: return "running";
    case JobState::Paused: return "paused";
    case JobState::Done: return "done";
    case JobState::Failed: return "failed";
    case JobState::Cancelled: return "cancelled";
    case JobState::NeedsCredentials: return "needs-credentials";
  }
  return "?";
}

std::optional<JobState> job_state_from(std::string_view text) {
  for (JobState s : {JobState::Queued, JobState::Discovering, JobState::Running, JobState::Paused, JobState::Done,
                     JobState::Failed, JobState::Cancelled, JobState::NeedsCredentials})
    if (text == to_string(s)) return s;
  return std::nullopt;
}

Job::Impl::Impl(Job* s, Engine& e, Spec sp) : self(s), eng(e), spec(std::move(sp)) {
  dir_fd = spec.dest_dir_fd >= 0 ? fcntl(spec.dest_dir_fd, F_DUPFD_CLOEXEC, 3)
                                 : open(spec.dest_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0) throw IoError(errno, "destination " + spec.dest_dir);
  if (faccessat(dir_fd, ".", W_OK | X_OK, AT_EACCESS) != 0) {
    int err = errno;
    close(dir_fd);
    throw IoError(err, "destination " + spec.dest_dir + " is not writable");
  }
  sd_event_add_defer(
      eng.loop(), &reap_src.s,
      [](sd_event_source*, void* ud) {
        auto* self = static_cast<Job::Impl*>(ud);
        self->retired_connections.clear();
        self->retired_channels.clear();
        self->retired_multis.clear();
        return 0;
      },
      this);
  sd_event_source_set_enabled(reap_src.s, SD_EVENT_OFF);
  sd_event_add_defer(
      eng.loop(), &resume_ended_src.s,
      [](sd_event_source*, void* ud) {
        static_cast<Job::Impl*>(ud)->end_resume_ended();
        return 0;
      },
      this);
  sd_event_source_set_enabled(resume_ended_src.s, SD_EVENT_OFF);
  files.resize(spec.manifest.entries.size());
  for (size_t i = 0; i < files.size(); ++i) {
    FileTask& f = files[i];
    f.index = i;
    f.entry = &spec.manifest.entries[i];
    f.size = f.entry->size;
    f.origin = url_origin(f.entry->url);
  }
}

Job::Impl::~Impl() {
  disc.drop_preconnected();
  for (auto& [r, owned] : requests) transport->stop(r);
  requests.clear();
  chunks.clear();  // multi handles after the easy handles that used them
  warm.clear();
  retired_channels.clear();
  retired_connections.clear();
  disc.stop();
  retired_multis.clear();
  if (dir_fd >= 0) close(dir_fd);
}

// A file already at its final name counts as this job's (skipped) only when
// it is a regular file of the job's owner and matches what the manifest
// promises: its sha256 when one is given (the file is read), else its size.
// Anything else is another file, or somebody else's: never overwritten, never
// counted (that file fails). True when it settled f.
bool Job::Impl::settle_existing(FileTask& f) {
  const std::string& name = f.entry->name;
  struct stat st;
  if (fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return false;
  auto refuse = [&](const std::string& why) {
    fail_file(&f, why + "; not overwriting it");
    return true;
  };
  if (!S_ISREG(st.st_mode)) return refuse("'" + name + "' at the destination is a " + file_kind(st.st_mode));
  if (spec.owner.set() && st.st_uid != spec.owner.uid)
    return refuse("a file named '" + name + "' that belongs to uid " + std::to_string(st.st_uid) +
                  " exists at the destination");
  uint64_t have = static_cast<uint64_t>(st.st_size);
  if (f.size && have != *f.size)
    return refuse("a different file named '" + name + "' exists at the destination (" + std::to_string(have) +
                  " bytes, expected " + std::to_string(*f.size) + ")");
  if (!f.entry->sha256.empty()) {
    int fd;
    try {
      fd = open_regular(dir_fd, name, O_RDONLY, spec.owner);
    } catch (const IoError& e) {
      return refuse(std::string("'") + name + "' at the destination cannot be checked: " + e.what());
    }
    if (fd < 0) return false;  // gone meanwhile: fetch it
    // Its sha256 is computed off the loop (it may be any size); the file
    // waits in Checking and is settled by settle_checked.
    auto owned = std::make_shared<UniqueFd>(fd);
    f.state = FileTask::State::Checking;
    f.checking = eng.file_work().post(
        spec.owner.uid, [owned, name](const FileWork::Stop& stop) { return sha256_fd(owned->fd, name, &stop); },
        [this, &f, have](std::string got, std::exception_ptr error) { settle_checked(f, have, got, error); });
    return true;
  }
  if (!f.size)
    return refuse("a file named '" + name + "' exists at the destination (" + std::to_string(have) +
                  " bytes) and neither the manifest nor the server gives a size or sha256 to compare it with");
  skip_existing(f, have);
  return true;
}

void Job::Impl::settle_checked(FileTask& f, uint64_t have, const std::string& got, std::exception_ptr error) {
  f.checking = {};
  if (f.state != FileTask::State::Checking) return;
  const std::string& name = f.entry->name;
  std::string why;
  try {
    if (error) std::rethrow_exception(error);
  } catch (const IoError& e) {
    why = "'" + name + "' at the destination cannot be checked: " + e.what();
  }
  if (why.empty() && got != f.entry->sha256)
    why = "a different file named '" + name + "' exists at the destination (sha256 " + got + ", expected " +
          f.entry->sha256 + ")";
  if (why.empty()) skip_existing(f, have);
  else fail_file(&f, why + "; not overwriting it");
  pump();
}

void Job::Impl::skip_existing(FileTask& f, uint64_t have) {
  f.state = FileTask::State::Skipped;
  ++files_skipped;
  bytes_resumed += have;
  bytes_done += have;
}

void Job::Impl::start() {
  start_us = eng.now_us();
  // Files the manifest gives a size for are compared now; the others once
  // discovery has asked the server (begin_transfer).
  for (FileTask& f : files)
    if (f.size) settle_existing(f);
  disc.start();
}

void Job::Impl::begin_transfer() {
  if (state != JobState::Discovering) return;
  double rtt_s = spec.opts.rtt_ms > 0 ? spec.opts.rtt_ms / 1e3 : disc.rtt_s;
  if (rtt_s <= 0) rtt_s = 1e-4;
  info.rtt_s = rtt_s;
  info.bandwidth_bps = spec.opts.bandwidth_mbps * 1e6;
  info.link_configured = spec.opts.bandwidth_configured;
  info.loss_pct = spec.opts.loss_pct;
  // Nothing configured: the path as its earlier jobs measured it, if known
  // (issue 55: the BDP cut assumed 1000 Mbit/s where the history knew the
  // host pair's 250, and Mathis's bound was used only with --loss-pct).
  if (!info.link_configured && spec.opts.path_link_mbps > 0)
    info.bandwidth_bps = spec.opts.path_link_mbps * 1e6, info.link_from_path = true;
  info.path_loss_pct = spec.opts.path_loss_pct >= 0 ? spec.opts.path_loss_pct : -1;
  if (info.loss_pct < 0) info.loss_pct = info.path_loss_pct;
  info.bdp_bytes = static_cast<uint64_t>(std::ceil(info.bandwidth_bps / 8 * rtt_s));
  info.tcp_buf_bytes = tcp_rmem_max();
  info.max_channels = spec.opts.max_channels;
  info.multiplexed = !origins.empty();
  for (const auto& [name, o] : origins) info.multiplexed = info.multiplexed && o.h2, info.origins.push_back(name);

  // Sizes for partitioning; a file of unknown size counts as one BDP (Medium).
  std::vector<size_t> idx;
  std::vector<uint64_t> sizes;
  for (FileTask& f : files) {
    if (f.state != FileTask::State::Pending) continue;
    if (f.size && spec.opts.max_file_bytes && *f.size > spec.opts.max_file_bytes) {
      fail_file(&f, std::to_string(*f.size) + " bytes, more than the limit of " + std::to_string(spec.opts.max_file_bytes) +
                        " per file");
      continue;
    }
    if (!f.entry->size && settle_existing(f)) continue;
    idx.push_back(f.index);
    sizes.push_back(f.size.value_or(info.bdp_bytes));
  }
  PartitionConfig pc;
  pc.bdp_bytes = info.bdp_bytes;
  std::vector<ChunkPlan> plans = partition_files(sizes, pc);
  for (ChunkPlan& plan : plans) {
    auto c = std::make_unique<Chunk>();
    c->index = chunks.size();
    for (size_t& i : plan.files) i = idx[i];  // back to job file indices
    c->plan = plan;
    // Largest first (see pump); a file of unknown size counts as one BDP.
    // Not in a Small chunk: a file under a BDP takes a few round trips
    // whatever its size, so its place does not move the job's end, and the
    // larger ones first would meet new connections in slow start (wan html,
    // 1000 files of 50-150 KB: 3.70-3.88 s sorted, 3.69-3.73 in order).
    if (plan.kind != ChunkKind::Small)
      std::stable_sort(plan.files.begin(), plan.files.end(), [&](size_t a, size_t b) {
        return files[a].size.value_or(info.bdp_bytes) > files[b].size.value_or(info.bdp_bytes);
      });
    for (size_t i : plan.files) {
      files[i].chunk = c.get();
      c->fresh.push_back(&files[i]);
      c->bytes_total += files[i].size.value_or(0);
    }
    info.chunks.push_back(c->plan);
    chunks.push_back(std::move(c));
  }
  for (FileTask& f : files) bytes_total += f.size.value_or(0);
  set_state(JobState::Running);  // with its chunks and totals known
  log::info("job: {} files, {} bytes; RTT {:.3f} ms{}, link {:.0f} Mbit/s{}{}, BDP {} bytes, {} chunks",
            files.size(), bytes_total, rtt_s * 1e3, spec.opts.rtt_ms > 0 ? " (configured)" : " (measured)",
            info.bandwidth_bps / 1e6,
            spec.opts.bandwidth_configured ? " (configured)"
            : info.link_from_path ? " (this path's as its earlier jobs measured it: " + spec.opts.path_known + ")"
                                  : " (assumed for the BDP: no network.bandwidth_mbps and no record of this path; the "
                                    "rate the link carries is measured as the job runs)",
            spec.opts.loss_pct < 0 && info.loss_pct >= 0 ? fmt::format(", loss {:.3g}% (the path's as measured before)",
                                                                       info.loss_pct)
                                                         : std::string(),
            info.bdp_bytes, chunks.size());
  for (auto& c : chunks)
    log::info("chunk {}: {} files, {} bytes, average {:.0f} bytes", to_string(c->plan.kind), c->plan.files.size(),
              c->plan.bytes, c->plan.avg_size());

  // The checkpoint timer first: the first pump may already finish the job
  // (every file was on disk), and finish_job disarms it.
  last_sync_us = eng.now_us();
  sd_event_add_time_relative(
      eng.loop(), &checkpoint_src.s, CLOCK_MONOTONIC, uint64_t(spec.opts.record_ms) * 1000, 1000,
      [](sd_event_source* s, uint64_t, void* ud) {
        auto* self = static_cast<Job::Impl*>(ud);
        log::JobScope scope(self->log_id);
        uint64_t now = self->eng.now_us();
        bool sync = now - self->last_sync_us >= uint64_t(self->spec.opts.sync_ms) * 1000;
        if (sync) self->last_sync_us = now;
        self->checkpoint_all(sync);
        if (!self->checkpoint_src.s) return 0;  // a write error ended the job
        self->reissue_stalled(now);
        sd_event_source_set_time_relative(s, uint64_t(self->spec.opts.record_ms) * 1000);
        return 0;
      },
      this);
  sd_event_source_set_enabled(checkpoint_src.s, SD_EVENT_ON);
  Params first;
  if (controller) {
    first = controller->transfer_begins(info);
  } else {
    first.chunks.assign(chunks.size(), ChunkParams{});
    first.reason = "no controller: cc 1, p 1, pp 1 until apply()";
  }
  apply(first);  // applies and pumps
  // No connection of the first shape could take the probe's over.
  if (disc.kept_probe.multi) retire(std::move(disc.kept_probe.multi));
  // The first connections take theirs when they connect (on the next turns
  // of the loop); what is left then is closed.
  disc.hold_preconnected(info.rtt_s);
}

void Job::Impl::apply(const Params& p) {
  if (p.chunks.size() != chunks.size()) {
    log::error("params for {} chunks given to a job of {} chunks; ignored", p.chunks.size(), chunks.size());
    return;
  }
  bool changed = p.chunks != current.chunks || p.rate_cap_bps != current.rate_cap_bps;
  current = p;
  current.cores = 0;
  current.freq_khz = 0;
  set_rate_cap(p.rate_cap_bps);
  if (changed && p.rate_cap_bps > 0) log::info("rate cap: {:.1f} Mbit/s ({})", p.rate_cap_bps / 1e6, p.reason);
  for (size_t i = 0; i < chunks.size(); ++i) {
    ChunkParams cp = p.chunks[i];
    cp.cc = std::max(1, cp.cc);
    cp.p = std::max(1, cp.p);
    cp.pp = std::max(1, cp.pp);
    chunks[i]->params = cp;
    if (changed)
      log::info("chunk {}: {} ({})", to_string(chunks[i]->plan.kind), to_string(cp),
                p.reason.empty() ? "no reason given" : p.reason);
  }
  pump();
}

void Job::Impl::reset_file(FileTask* f) {
  uint64_t lost = f->part->received().bytes();
  bytes_done -= lost;
  f->chunk->bytes_done -= lost;
  ++f->gen;
  f->part->reset();
}

namespace {
constexpr uint64_t kRecordBytes = 1 << 20;
}  // namespace

// A record costs a create, a write and a rename that evicts the last one,
// and a sync checkpoint an fdatasync, per file: with hundreds of small files
// in flight (min-energy's cc=17 x pp=25 on the html set) that was most of
// the engine's system time. So a file is recorded when it holds at least
// kRecordBytes not yet recorded, or has waited a sync interval: a large file
// still every record_ms, a small or slow one at most every sync_ms, and a
// kill -9 costs a file at most kRecordBytes or sync_ms of its bytes.
void Job::Impl::checkpoint_all(bool sync) {
  const uint64_t now = eng.now_us(), age = uint64_t(spec.opts.sync_ms) * 1000;
  for (FileTask& f : files) {
    if (f.state != FileTask::State::Active || f.commit == FileTask::Commit::InBatch) continue;
    uint64_t pending = sync ? f.part->unsynced_bytes() : f.part->unrecorded_bytes();
    if (pending == 0 || (pending < kRecordBytes && now - f.recorded_us < age)) continue;
    f.recorded_us = now;
    try {
      if (sync) f.part->checkpoint();
      else f.part->record_written();
    } catch (const IoError& e) {
      io_failed(&f, e);
      if (state != JobState::Running) return;
    }
  }
}

void Job::Impl::fail_file(FileTask* f, const std::string& reason) {
  if (f->state == FileTask::State::Failed) return;
  stop_requests(f);
  f->state = FileTask::State::Failed;
  ++f->gen;
  if (f->part) f->part->close_for_resume();  // keeps durable bytes for a later run
  ++files_failed;
  failed.push_back({f->entry->url, reason});
  log::warn("{}: failed: {}", shown_url(f->entry->url), reason);
}

void Job::Impl::fatal(const std::string& reason) {
  if (state == JobState::Failed) return;
  log::error("job stopped: {}", reason);
  fatal_error = reason;
  for (auto it = requests.begin(); it != requests.end();) {
    Request* r = (it++)->first;
    if (r->kind == RequestKind::Get) preempt(r, false);
    else {
      transport->stop(r);
      take(r);
    }
  }
  finish_job(JobState::Failed);
}

void Job::Impl::io_failed(FileTask* f, const IoError& e) {
  if (dynamic_cast<const NameRefused*>(&e)) {
    fail_file(f, e.what());
    return;
  }
  int err = e.code().value();
  if (err == EMFILE || err == ENFILE) {
    // Not the destination's fault: this process may open no more files.
    rlimit rl{};
    getrlimit(RLIMIT_NOFILE, &rl);
    fatal(fmt::format("out of file descriptors ({}; RLIMIT_NOFILE {}): this job's files and connections at once need "
                      "more than the process may open; lower cc x p, or raise the limit (LimitNOFILE=, ulimit -n)",
                      e.what(), rl.rlim_cur));
    return;
  }
  std::string why = "destination " + spec.dest_dir + ": " + e.what();
  if ((err == ENOSPC || err == EDQUOT) && spec.opts.pause_when_full) {
    pause(why + "; paused: resume once there is space");
    return;
  }
  fatal(why);
}

// A complete file is verified off the loop (a sha256 of gigabytes would stop
// every transfer meanwhile), then synced and renamed by a group commit, also
// off the loop (start_commit).
void Job::Impl::maybe_finish_file(FileTask* f) {
  if (f->state != FileTask::State::Active || f->inflight > 0 || f->checking || f->commit != FileTask::Commit::None ||
      !f->part->complete())
    return;
  std::string sha = f->part->expected_sha256(), what = f->entry->name + PartFile::kPartSuffix;
  std::shared_ptr<UniqueFd> owned;
  try {
    f->part->check_size();
    if (sha.empty()) {  // the size was the check: straight to the commit
      queue_commit(f);
      return;
    }
    owned = std::make_shared<UniqueFd>(f->part->reader_fd());
  } catch (const VerifyError& e) {
    fail_file(f, e.what());
    return;
  } catch (const IoError& e) {
    io_failed(f, e);
    return;
  }
  f->checking = eng.file_work().post(
      spec.owner.uid, [owned, sha, what](const FileWork::Stop& stop) { return sha256_fd(owned->fd, what, &stop); },
      [this, f](std::string got, std::exception_ptr error) { finish_checked(f, got, error); });
}

void Job::Impl::queue_commit(FileTask* f) {
  f->commit = FileTask::Commit::Ready;
  commit_ready.push_back(f);
  gather_commit();
}

// Verified files wait for company before their commit while other files
// are still arriving: up to kCommitGatherFiles of them, or kCommitGatherMs
// after the first, so that a batch is large enough for one syncfs
// (sync_batch_by_fs) rather than an fdatasync each. On wan-tls html (1000
// files of ~100 KB, about 300 a second) batches were of one to three files
// without it. Nothing waits once no request is in flight.
void Job::Impl::gather_commit() {
  if (commit_batch || commit_ready.empty()) return;
  bool more_coming = false;
  for (const auto& [r, owned] : requests)
    if (r->kind == RequestKind::Get) {
      more_coming = true;
      break;
    }
  if (!more_coming || commit_ready.size() >= kCommitGatherFiles) {
    if (commit_gather_src.s) sd_event_source_set_enabled(commit_gather_src.s, SD_EVENT_OFF);
    start_commit();
    return;
  }
  int on = SD_EVENT_OFF;
  if (commit_gather_src.s && sd_event_source_get_enabled(commit_gather_src.s, &on) >= 0 && on != SD_EVENT_OFF) return;
  commit_gather_src.arm_at(
      eng.loop(), eng.now_us() + kCommitGatherMs * 1000,
      [](sd_event_source*, uint64_t, void* ud) {
        log::JobScope scope(static_cast<Job::Impl*>(ud)->log_id);
        static_cast<Job::Impl*>(ud)->start_commit();
        return 0;
      },
      this);
}

void Job::Impl::start_commit() {
  if (commit_batch || commit_ready.empty()) return;
  std::vector<FileTask*> batch, ready;
  ready.swap(commit_ready);  // io_failed below may end the job, which clears commit_ready
  // Each plan holds a descriptor (and with it its name's lock) until
  // commit_files is done with it; whatever path the batch takes, none is left
  // open (a leaked one kept the name busy for every later run of the job).
  std::shared_ptr<std::vector<PartFile::CommitPlan>> plans(new std::vector<PartFile::CommitPlan>,
                                                           [](std::vector<PartFile::CommitPlan>* v) {
                                                             for (auto& p : *v)
                                                               if (p.fd >= 0) ::close(p.fd);
                                                             delete v;
                                                           });
  for (FileTask* f : ready) {
    f->commit = FileTask::Commit::None;
    if (f->state != FileTask::State::Active || !f->part) continue;
    try {
      plans->push_back(f->part->commit_plan());
    } catch (const IoError& e) {
      io_failed(f, e);
      continue;
    }
    f->commit = FileTask::Commit::InBatch;
    batch.push_back(f);
  }
  // Posted even if the job ended meanwhile: these files are whole and
  // verified, and the job's end left them to the batch.
  if (batch.empty()) return;
  auto outcomes = std::make_shared<std::vector<CommitOutcome>>();
  commit_batch = eng.file_work().post(
      spec.owner.uid,
      [plans, outcomes](const FileWork::Stop&) {
        *outcomes = commit_files(*plans);  // never stopped half-way: it is short, and each file is whole
        return std::string();
      },
      [this, batch, outcomes](std::string, std::exception_ptr) { commit_done(batch, *outcomes); },
      FileWork::Cancel::Finishes);  // a job torn down (paused, cancelled) still lets its whole files land
}

void Job::Impl::commit_done(const std::vector<FileTask*>& batch, const std::vector<CommitOutcome>& outcomes) {
  commit_batch = {};
  for (size_t i = 0; i < batch.size(); ++i) {
    FileTask* f = batch[i];
    f->commit = FileTask::Commit::None;
    const CommitOutcome o = i < outcomes.size() ? outcomes[i] : CommitOutcome{EIO, "commit " + f->entry->name};
    if (!f->part) continue;
    f->part->plan_done();
    if (o.err == EEXIST) {
      if (f->state == FileTask::State::Active) fail_file(f, o.what);
      continue;
    }
    if (o.err && !o.renamed) {
      if (f->state == FileTask::State::Active) io_failed(f, IoError(o.err, o.what));
      continue;
    }
    // At its final name (even when the directory's sync failed after: the
    // job stops below, and no record is written again for a .part that is gone).
    f->part.reset();  // the descriptor closes with it
    if (o.err && f->state == FileTask::State::Active) {
      f->state = FileTask::State::Done;
      ++files_done;
      ++f->chunk->files_done;
      io_failed(f, IoError(o.err, o.what));
      continue;
    }
    if (f->state != FileTask::State::Active) continue;  // the job ended meanwhile
    f->state = FileTask::State::Done;
    ++files_done;
    ++f->chunk->files_done;
    log::debug("{}: done", f->entry->name);
  }
  if (state != JobState::Running && state != JobState::Paused) return;
  gather_commit();
  pump();
}

void Job::Impl::finish_checked(FileTask* f, const std::string& got, std::exception_ptr error) {
  f->checking = {};
  if (f->state != FileTask::State::Active || !f->part) return;
  try {
    if (error) std::rethrow_exception(error);
    if (!f->part->expected_sha256().empty()) f->part->verify_sha256(got);
  } catch (const VerifyError& e) {
    fail_file(f, e.what());
    pump();
    return;
  } catch (const IoError& e) {
    io_failed(f, e);
    pump();
    return;
  }
  queue_commit(f);
}

void Job::Impl::maybe_finish_job() {
  if (state != JobState::Running) return;
  // A file's end (done, failed, skipped) is final, so the files before the
  // first open one need no second look: called at each file's end, a scan
  // from the start made a 100,000-file job quadratic.
  for (; first_open < files.size(); ++first_open) {
    const FileTask& f = files[first_open];
    if (f.state == FileTask::State::Pending || f.state == FileTask::State::Checking ||
        f.state == FileTask::State::Active)
      return;
  }
  finish_job(JobState::Done);
}

void Job::Impl::set_state(JobState s) {
  if (state == s) return;
  state = s;
  if (self && self->on_state) self->on_state(s);
}

void Job::Impl::finish_job(JobState s) {
  // The controller records the tail of the transfer while the job still runs.
  if ((state == JobState::Running || state == JobState::Paused) && controller) controller->transfer_ends();
  set_state(s);
  end_us = eng.now_us();
  // A commit batch running off the loop finishes on its own (its files are
  // whole and verified, and get their final names); its files are its own.
  // Files still waiting for a batch stay .part files, resumable.
  commit_ready.clear();
  commit_gather_src.reset();
  for (FileTask& f : files) {
    f.checking.cancel();
    if (f.commit == FileTask::Commit::InBatch && f.part) f.part->release();
    else if (f.part) f.part->close_for_resume();
    if (f.commit == FileTask::Commit::Ready) f.commit = FileTask::Commit::None;
  }
  retire_all_channels();
  disc.drop_preconnected();
  checkpoint_src.reset();
  retry_src.reset();
  log::info("job {}: {} of {} files done, {} skipped, {} failed, {} bytes fetched in {:.2f} s", to_string(s),
            files_done, files.size(), files_skipped, files_failed, bytes_fetched, to_s(end_us - start_us));
  if (fresh_retries.http2_framing > 0)
    log::warn("job: {} request{} failed with libcurl's HTTP/2 framing error on a reused connection and {} retried on "
              "a fresh one (libcurl before 8.0.0: curl/curl#10634)",
              fresh_retries.http2_framing, fresh_retries.http2_framing == 1 ? "" : "s",
              fresh_retries.http2_framing == 1 ? "was" : "were");
  if (self && self->on_finished) self->on_finished();
}

void Job::Impl::pause(const std::string& reason) {
  if (state != JobState::Running) return;
  pause_reason = reason;
  for (auto it = requests.begin(); it != requests.end();) {
    Request* r = (it++)->first;
    if (r->kind == RequestKind::Get) preempt(r, true);
  }
  retire_all_channels();
  set_state(JobState::Paused);  // first: a full disk in the checkpoint below must not pause again
  checkpoint_all(true);
  if (reason.empty()) log::info("job paused");
  else log::warn("job paused: {}", reason);
}

void Job::Impl::resume() {
  if (state != JobState::Paused) return;
  pause_reason.clear();
  needs_credentials = false;
  set_state(JobState::Running);
  log::info("job resumed");
  pump();
}

void Job::Impl::cancel(bool keep_partial) {
  if (state == JobState::Done || state == JobState::Failed || state == JobState::Cancelled) return;
  for (auto it = requests.begin(); it != requests.end();) {
    Request* r = (it++)->first;
    transport->stop(r);
    if (r->kind == RequestKind::Get) {
      --r->file->inflight;
      if (r->conn) std::erase(r->conn->inflight, r);
    }
    take(r);
  }
  if (!keep_partial) {
    size_t removed = 0;
    for (FileTask& f : files) {
      if (f.state == FileTask::State::Done || f.state == FileTask::State::Skipped) continue;
      if (f.commit == FileTask::Commit::InBatch) continue;  // whole and verified: it gets its final name
      if (f.part) {
        f.part->discard();
        ++removed;
      } else if (PartFile::discard_leftover(dir_fd, f.entry->name, f.entry->url, spec.owner)) {
        ++removed;
      }
    }
    if (removed) log::info("cancelled: removed {} partial file(s)", removed);
  }
  finish_job(JobState::Cancelled);
}

void Job::Impl::on_request_done(Request* r, CURLcode code) {
  std::unique_ptr<Request> owned = take(r);
  note_connection(r, code);
  if (r->kind == RequestKind::Head) {
    disc.on_head_done(std::move(owned), code);
    return;
  }
  on_get_done(std::move(owned), code);
}

Job::Impl::Redirected Job::Impl::redirected(FileTask* f, Request* r) {
  if (!r->follows_itself) return Redirected::No;
  long code = 0;
  curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &code);
  if (code < 300 || code >= 400) return Redirected::No;
  r->pos = r->req_begin;  // a 3xx's body was not the file's
  if (r->location.empty()) {
    if (code == 304) return Redirected::No;
    fail_file(f, "HTTP " + std::to_string(code) + " without a Location to follow");
    return Redirected::Failed;
  }
  const std::string& loc = r->location;
  if (++f->redirects > 10) {
    fail_file(f, "more than 10 redirects");
    return Redirected::Failed;
  }
  bool down = spec.opts.credentials && spec.opts.credentials->allow_downgrade;
  Redirect to = redirect_target(f->url(), loc, down);
  if (!to.refused.empty()) {
    fail_file(f, "HTTP " + std::to_string(code) + " to " + shown_url(loc) + " refused: " + to.refused);
    return Redirected::Failed;
  }
  std::string before = f->url_origin(), after = url_origin(to.url);
  if (before != after && spec.opts.credentials && spec.opts.credentials->find(before))
    log::info("{}: redirected from {} to {}: the credentials given for {} are not sent there", f->entry->name, before,
              shown_url(after), before);
  f->location = std::move(to.url);
  f->location_origin = std::move(after);
  return Redirected::Follow;
}

std::string Job::Impl::refused_auth(FileTask* f, Request* r, long http) {
  const std::string& origin = f->url_origin();
  if (r->credentials_sent.empty())
    return fmt::format(" (no credentials were sent: the job has none for {})", shown_url(origin));
  std::string note = fmt::format(" (sent: {})", r->credentials_sent);
  if (http == 401 && auth_worked.count(origin) && state == JobState::Running) {
    // Accepted before on this origin: they expired (a token's lifetime is
    // shorter than the job's). The job waits for new ones and goes on.
    needs_credentials = true;
    pause(fmt::format("{} answered 401 to credentials it accepted before ({}): new ones are needed", shown_url(origin),
                      r->credentials_sent));
  }
  return note;
}

void Job::Impl::on_get_done(std::unique_ptr<Request> r, CURLcode code) {
  FileTask* f = r->file;
  --f->inflight;
  if (r->conn) std::erase(r->conn->inflight, r.get());
  Origin& o = origins[f->origin];
  if (!o.known && !(r->conn && r->conn->http1 && r->conn->tls)) {  // https: ALPN told us (when h2 was offered)
    long v = 0;
    curl_easy_getinfo(r->easy, CURLINFO_HTTP_VERSION, &v);
    o.h2 = v == CURL_HTTP_VERSION_2_0;
    o.known = true;
  }
  if (f->state == FileTask::State::Active) {
    bool progressed = r->pos > r->req_begin;
    if (r->io_errno) {
      // What this request did not write is fetched again (after a resume);
      // a body of unknown length starts again from its first byte.
      IoError e(r->io_errno, r->abort_reason);
      if (r->end_known) {
        if (r->pos < r->end) requeue(f, {r->pos, r->end}, true, 0, true);
      } else {
        try {
          reset_file(f);
        } catch (const IoError& again) {
          e = again;
        }
        requeue(f, {0, 0}, false, 0, true);
      }
      io_failed(f, e);
      pump();
      return;
    }
    switch (redirected(f, r.get())) {
      case Redirected::Follow:
        requeue(f, {r->req_begin, r->end}, r->end_known, 0, true);
        pump();
        return;
      case Redirected::Failed:
        maybe_finish_file(f);
        pump();
        return;
      case Redirected::No:
        break;
    }
    if (!r->source_changed.empty()) {
      restart_file(f, r->source_changed, r->changed_size);
    } else if (r->if_range_ignored) {
      if (!o.if_range_ignored)
        log::warn("{}: answered If-Range of the version asked for with the whole body: ranges go without If-Range from "
                  "now on, each response's validator still compared",
                  shown(f->origin, 128));
      o.if_range_ignored = true;
      requeue(f, {r->pos, r->end}, true, 0, true);
    } else if (!r->abort_reason.empty()) {
      fail_file(f, r->abort_reason);
    } else if (r->range_ignored) {
      collapse_to_one_connection(f);
    } else if (code == CURLE_OK || (code == CURLE_WRITE_ERROR && r->stopped_at_end)) {
      if (!r->credentials_sent.empty()) auth_worked.insert(f->url_origin());
      if (!r->end_known) {
        f->size = r->pos;  // the body defined the size
        f->part->set_size(r->pos);
        f->chunk->bytes_total += r->pos;
        bytes_total += r->pos;
      } else if (r->pos < r->end) {
        // The server closed the body early: fetch the rest.
        Failure why{"body ended " + std::to_string(r->end - r->pos) + " bytes early", true};
        f->failures = progressed ? 0 : f->failures + 1;
        if (f->failures > spec.opts.max_retries) fail_file(f, why.reason);
        else requeue(f, {r->pos, r->end}, true, backoff_us(std::max(1, f->failures)), false);
      }
      if (progressed) f->failures = 0;
    } else if (r->h2c_reuse && !progressed && code != CURLE_HTTP_RETURNED_ERROR) {
      // The stream's h2c connection was gone; the next request opens a new one.
      requeue(f, {r->pos, r->end}, r->end_known, 0, true);
    } else {
      Failure why = classify(code, r->easy, r->errbuf);
      if (long http = 0; code == CURLE_HTTP_RETURNED_ERROR &&
                         curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &http) == CURLE_OK &&
                         (http == 401 || http == 403)) {
        why.reason += refused_auth(f, r.get(), http);
        if (state == JobState::Paused) {  // expired: this range waits for the new credentials
          requeue(f, {r->pos, r->end}, r->end_known, 0, true);
          return;
        }
      }
      if (progressed) f->failures = 0;
      else if (counts_as_attempt(f, why)) ++f->failures;
      if (!why.retryable) {
        fail_file(f, why.reason);
      } else if (f->failures > spec.opts.max_retries) {
        fail_file(f, why.reason + " (after " + std::to_string(f->failures) + " attempts)");
      } else {
        log::info("{}: {}; retrying bytes {}-{}", f->entry->name, why.reason, r->pos, r->end);
        fresh_retries.note(why);
        if (r->end_known)
          requeue(f, {r->pos, r->end}, true, backoff_us(std::max(1, f->failures)), false, why.fresh_connection());
        else {
          reset_file(f);
          requeue(f, {0, 0}, false, backoff_us(std::max(1, f->failures)), false, why.fresh_connection());
        }
      }
    }
    maybe_finish_file(f);
  }
  pump();
}

JobProgress Job::Impl::progress() const {
  JobProgress p;
  p.state = state;
  p.bytes_total = bytes_total;
  if (state == JobState::Discovering || state == JobState::Queued)
    for (const FileTask& f : files) p.bytes_total += f.size.value_or(0);
  p.bytes_done = bytes_done;
  p.bytes_fetched = bytes_fetched;
  p.bytes_resumed = bytes_resumed;
  p.body_reads = body_reads;
  p.cap_resumes = cap_resumes;
  p.cap_resumes_cut = cap_resumes_cut;
  p.preconnected = disc.preconnected_opened;
  p.preconnected_used = disc.preconnected_used;
  p.files_total = files.size();
  p.files_done = files_done;
  p.files_failed = files_failed;
  p.files_skipped = files_skipped;
  p.source_restarts = source_restarts;
  p.files_unvalidated = files_unvalidated;
  p.requests_reissued = requests_reissued;
  p.retried_not_http = fresh_retries.not_http;
  p.retried_http2_framing = fresh_retries.http2_framing;
  p.seconds = to_s((end_us ? end_us : eng.now_us()) - start_us);
  return p;
}

// ---- the public facade ----

Job::Job(Engine& engine, Spec spec) : impl_(std::make_unique<Impl>(this, engine, std::move(spec))) {}
Job::~Job() = default;
void Job::set_log_job(uint64_t id) { impl_->log_id = id; }

void Job::set_flow_monitor(FlowMonitor* m, uint32_t job_id) {
  impl_->flow_monitor = m;
  impl_->job_id = job_id;
}
void Job::set_controller(JobController* c) { impl_->controller = c; }
void Job::start() { impl_->start(); }
void Job::apply(const Params& p) { impl_->apply(p); }
void Job::new_interval() { impl_->new_interval(); }
void Job::limit_connections(const std::map<std::string, int>& per_origin) { impl_->limit_connections(per_origin); }
void Job::pause() { impl_->pause(); }
void Job::resume() { impl_->resume(); }
void Job::cancel(bool keep_partial) { impl_->cancel(keep_partial); }
JobState Job::state() const { return impl_->state; }
const EngineOptions& Job::options() const { return impl_->spec.opts; }
JobProgress Job::progress() const { return impl_->progress(); }
const StartFacts& Job::info() const { return impl_->info; }
const std::vector<FailedFile>& Job::failed() const { return impl_->failed; }
const std::string& Job::fatal_error() const { return impl_->fatal_error; }
const std::string& Job::pause_reason() const { return impl_->pause_reason; }
bool Job::needs_credentials() const { return impl_->needs_credentials; }
void Job::set_credentials(std::shared_ptr<const JobCredentials> c) {
  // Requests made from now on take them; those in flight keep what they sent.
  impl_->spec.opts.credentials = std::move(c);
  impl_->auth_worked.clear();
}

std::vector<ChunkStatus> Job::chunks() const {
  std::vector<ChunkStatus> out;
  for (const auto& c : impl_->chunks)
    out.push_back({c->plan.kind, c->plan.files.size(), c->plan.avg_size(), c->plan.size_sd, c->params, c->bytes_total, c->bytes_done,
                   c->bytes_fetched, c->files_done, c->finished});
  return out;
}

std::vector<OriginStatus> Job::origins() const {
  std::vector<OriginStatus> out;
  for (const auto& [key, o] : impl_->origins) {
    OriginStatus st{key, !o.known ? "unknown" : (o.h2 ? "HTTP/2" : "HTTP/1.1"), ""};
    if (key.size() > 6 && strncasecmp(key.c_str(), "https:", 6) == 0) st.tls = impl_->tls_trust();
    out.push_back(std::move(st));
  }
  return out;
}

std::optional<size_t> Job::chunk_of_flow(uint64_t flow_id) const {
  auto it = impl_->flow_chunk.find(flow_id);
  if (it == impl_->flow_chunk.end()) return std::nullopt;
  return it->second;
}

void Job::forget_flow(uint64_t flow_id) { impl_->flow_chunk.erase(flow_id); }

}  // namespace xfer
