// The scheduler: keeps each chunk's tree of channels and connections in the
// shape of its params (cc channels, p connections per channel, pp requests
// per connection), and feeds connections with pieces: queued pieces of the channel's own files,
// then remainders other requests left behind, then a fresh file.
#include <algorithm>

#include "job_impl.h"
#include "xfer/validator.h"
#include "xfer/log.h"
#include "xfer/text.h"

namespace xfer {
namespace {

bool piece_valid(const Piece& p) {
  return p.file->state == FileTask::State::Active && p.gen == p.file->gen;
}

}  // namespace

bool Job::Impl::connection_has_room(const Connection& s, int pp) const {
  if (s.inflight.empty()) return true;
  if (s.http1 && s.tls) return false;
  const Origin& o = origins.at(s.inflight.front()->file->origin);
  return o.h2 && static_cast<int>(s.inflight.size()) < pp;
}

void Job::Impl::requeue(FileTask* f, Range r, bool end_known, uint64_t delay_us, bool front, bool fresh_connection) {
  if (end_known && r.begin >= r.end) return;  // nothing left of it to ask (an empty Range is a 416)
  Piece p{f, r, f->gen, end_known, delay_us ? eng.now_us() + delay_us : 0, fresh_connection};
  if (front) f->chunk->requeued.push_front(p);
  else f->chunk->requeued.push_back(p);
  if (p.not_before_us) arm_retry(p.not_before_us);
}

void Job::Impl::arm_retry(uint64_t at_us) {
  if (retry_at_us && retry_at_us <= at_us && retry_at_us > eng.now_us()) return;
  retry_at_us = at_us;
  retry_src.arm_at(
      eng.loop(), at_us,
      [](sd_event_source*, uint64_t, void* ud) {
        auto* self = static_cast<Job::Impl*>(ud);
        self->retry_at_us = 0;
        if (self->state == JobState::Discovering) self->disc.dispatch();
        else self->pump();
        return 0;
      },
      this);
}

void Job::Impl::retire(std::unique_ptr<Channel> ch) {
  retired_channels.push_back(std::move(ch));
  sd_event_source_set_enabled(reap_src.s, SD_EVENT_ONESHOT);
}

void Job::Impl::retire(std::unique_ptr<Connection> s) {
  retired_connections.push_back(std::move(s));
  sd_event_source_set_enabled(reap_src.s, SD_EVENT_ONESHOT);
}

void Job::Impl::retire(std::unique_ptr<CurlMulti> m) {
  retired_multis.push_back(std::move(m));
  sd_event_source_set_enabled(reap_src.s, SD_EVENT_ONESHOT);
}

// A chunk that finishes (or a lowered cc) retires channels whose
// connections are open, idle and warm, while the next chunk's channels
// would open new ones: a handshake and slow start each, 16 of them at once
// on a mixed set. So idle connections wait in `warm` for the channels that
// start after them, as a client's 16 slots go on to the next files of its
// list. lossy-wan image (80 ms, 2 chunks, 16 channels over both): 377
// Mbit/s with a new connection per channel, 398 with the set in one chunk,
// curl --parallel 16 406 (the warm connections alone: 380; the rest is the
// order, the set's largest files last). A connection that moves takes its
// flow along.
void Job::Impl::keep_warm(Channel& ch) {
  for (auto& s : ch.connections)
    if (s && s->used && s->inflight.empty() && warm.size() < size_t(std::max(1, spec.opts.max_channels))) {
      s->channel = nullptr;
      warm.push_back(std::move(s));
    }
}

void Job::Impl::adopt_warm(Channel& ch) {
  // Long bodies start on fresh connections, for the reason a long body
  // closes its connection when done (start_get).
  if (ch.chunk->plan.avg_size() >= double(2 * split_min_bytes())) return;
  for (auto& s : ch.connections) {
    if (s->used || !s->inflight.empty()) continue;
    auto it = std::find_if(warm.begin(), warm.end(), [&](const auto& w) { return w->http1 == s->http1; });
    if (it == warm.end()) return;
    retire(std::move(s));
    s = std::move(*it);
    warm.erase(it);
    s->channel = &ch;
    if (s->flow_id) flow_chunk[*s->flow_id] = ch.chunk->index;
  }
}

void Job::Impl::retire_all_channels() {
  for (auto& s : warm) retire(std::move(s));
  warm.clear();
  for (auto& c : chunks) {
    for (auto& ch : c->channels) {
      for (auto& s : ch->connections) drop_connection(*s, false);
      retire(std::move(ch));
    }
    c->channels.clear();
  }
}

// Removes a request that has not completed. With requeue, the unreceived rest
// of its range goes back to its chunk, at the front.
void Job::Impl::preempt(Request* r, bool requeue_rest) {
  transport->stop(r);
  std::unique_ptr<Request> owned = take(r);
  FileTask* f = r->file;
  --f->inflight;
  if (r->conn) {
    auto& v = r->conn->inflight;
    v.erase(std::find(v.begin(), v.end(), r));
  }
  if (!requeue_rest || f->state != FileTask::State::Active) return;
  if (!r->end_known) {
    // A body of unknown length cannot be resumed by range: start it over.
    try {
      reset_file(f);
    } catch (const IoError& e) {
      io_failed(f, e);
      return;
    }
    requeue(f, {0, 0}, false, 0, true);
  } else if (r->pos < r->end) {
    requeue(f, {r->pos, r->end}, true, 0, true);
  }
}

void Job::Impl::drop_connection(Connection& s, bool requeue_rest) {
  while (!s.inflight.empty()) preempt(s.inflight.back(), requeue_rest);
}

std::unique_ptr<Connection> Job::Impl::new_connection(Channel& ch, bool h1) {
  Discovery::KeptProbe& k = disc.kept_probe;
  if (!k.multi || (k.needs_h2 && h1)) return std::make_unique<Connection>(&ch, std::make_unique<CurlMulti>(eng.loop()), h1);
  auto s = std::make_unique<Connection>(&ch, std::move(k.multi), h1);
  s->tls = k.tls;
  // The GETs' socket callback, which hands each new connection to the flow
  // monitor, never sees this one: it is handed over here.
  if (flow_monitor && k.fd >= 0) flow_chunk[flow_monitor->own(k.fd, job_id)] = ch.chunk->index;
  log::debug("{}: the first connection reuses the probe's (fd {})", k.origin, k.fd);
  return s;
}

// Brings a chunk's tree to the shape of its params; takes effect at once.
void Job::Impl::reconcile(Chunk& c) {
  const ChunkParams& want = c.params;
  size_t cc = c.finished ? 0 : static_cast<size_t>(std::max(1, want.cc));
  size_t p = static_cast<size_t>(std::max(1, want.p));
  while (c.channels.size() > cc) {
    Channel& ch = *c.channels.back();
    keep_warm(ch);
    for (auto& s : ch.connections)
      if (s) drop_connection(*s, true);
    for (auto it = ch.queue.rbegin(); it != ch.queue.rend(); ++it) c.requeued.push_front(*it);
    retire(std::move(c.channels.back()));
    c.channels.pop_back();
  }
  while (c.channels.size() < cc) {
    auto ch = std::make_unique<Channel>();
    ch->chunk = &c;
    c.channels.push_back(std::move(ch));
  }
  for (auto& ch : c.channels) {
    while (ch->connections.size() > p) {
      drop_connection(*ch->connections.back(), true);
      retire(std::move(ch->connections.back()));
      ch->connections.pop_back();
    }
    const bool h1 = want.pp <= 1;
    while (ch->connections.size() < p) ch->connections.push_back(new_connection(*ch, h1));
    for (auto& s : ch->connections) {
      if (s->http1 != h1 && s->inflight.empty()) {
        if (!s->tls) {
          s->http1 = h1;  // nothing negotiated yet that pp would change
        } else {
          retire(std::move(s));
          s = new_connection(*ch, h1);
        }
      }
      // pp lowered: the newest requests beyond it give their rest back.
      int cap = std::max(1, want.pp);
      while (static_cast<int>(s->inflight.size()) > cap) preempt(s->inflight.back(), true);
    }
  }
}

bool Job::Impl::activate(FileTask* f) {
  try {
    f->part = std::make_unique<PartFile>(dir_fd, f->entry->name, f->entry->url, f->size, f->entry->sha256,
                                         spec.owner, spec.opts.direct_io);
  } catch (const IoError& e) {
    // Held by another writer: perhaps the commit of an earlier run of this
    // very job (paused and resumed at once), which lets go in a moment. The
    // file waits a while, at the back of its chunk, and is settled again.
    if (dynamic_cast<const NameRefused*>(&e) && e.code().value() == EBUSY && f->busy_waits < kBusyWaits) {
      if (f->busy_waits++ == 0) log::info("{}; waiting up to {} s for it", e.what(), kBusyWaits * kBusyWaitUs / 1000000);
      f->not_before_us = eng.now_us() + kBusyWaitUs;
      f->chunk->fresh.push_back(f);
      arm_retry(f->not_before_us);
      return false;
    }
    // Not opened: a name that is not ours fails the file; otherwise the file
    // waits at the head of its chunk for the job to go on (a full disk pauses).
    if (!dynamic_cast<const NameRefused*>(&e)) f->chunk->fresh.push_front(f);
    io_failed(f, e);
    return false;
  }
  f->state = FileTask::State::Active;
  f->recorded_us = eng.now_us();
  uint64_t resumed = f->part->resumed_bytes();
  // Bytes of an earlier run that nothing ties to a version of the source (the
  // server gave no validator, the manifest no sha256) could be of a version
  // the server no longer has: fetched again unless the caller trusts them.
  if (resumed && f->part->validator().empty() && f->entry->sha256.empty()) {
    ++files_unvalidated;
    if (spec.opts.unvalidated_resume) {
      log::warn("{}: no validator (the server gave no ETag or Last-Modified, the manifest no sha256): the {} bytes "
                "on disk are trusted (unvalidated_resume = trust)",
                f->entry->name, resumed);
    } else {
      log::warn("{}: no validator (the server gave no ETag or Last-Modified, the manifest no sha256): the {} bytes "
                "on disk may be of another version, and the file is fetched whole (unvalidated_resume = trust keeps them)",
                f->entry->name, resumed);
      try {
        f->part->reset();
      } catch (const IoError& e) {
        io_failed(f, e);
        return false;
      }
      resumed = 0;
    }
  }
  if (resumed) {
    bytes_resumed += resumed;
    bytes_done += resumed;
    f->chunk->bytes_done += resumed;
    log::info("{}: resuming, {} of {} bytes already on disk", f->entry->name, resumed, f->size.value_or(0));
  }
  if (f->part->complete()) {
    maybe_finish_file(f);
    return false;
  }
  return true;
}

// Cuts what a file still misses into pieces for the channel's p connections.
void Job::Impl::queue_pieces(Channel& ch, FileTask* f) {
  int p = std::max(1, ch.chunk->params.p);
  if (!f->size) {
    ch.queue.push_back(Piece{f, {0, 0}, f->gen, false, 0});
    return;
  }
  std::vector<Range> gaps = f->part->received().missing(*f->size);
  if (!f->ranges_ok) {
    ch.queue.push_back(Piece{f, {0, *f->size}, f->gen, true, 0});
    return;
  }
  uint64_t missing = 0;
  for (const Range& g : gaps) missing += g.size();
  for (const Range& g : gaps) {
    // Enough pieces for the gap's share of the p connections.
    uint64_t n = std::max<uint64_t>(1, (uint64_t(p) * g.size() + missing - 1) / missing);
    for (const Range& r : split_range(g, static_cast<int>(std::min<uint64_t>(n, 1u << 20)), spec.opts.min_piece_bytes))
      ch.queue.push_back(Piece{f, r, f->gen, true, 0});
  }
}

// A file's missing bytes are cut into one piece per connection of its
// channel, not into pieces of a fixed size: on HTTP/1.1 each request after
// the first on a connection restarts the sender from an idle pipe, and the
// server's BBR, still in startup (its flow had been limited by our receive
// window), then sends its whole window into the bottleneck queue and loses
// a window's worth every second from then on. Measured on xfer-linkemu, 500
// Mbit/s, 40 ms, one 444 MB file on one connection: 64-BDP pieces (3
// requests) 369 Mbit/s, one request 454 (curl 457); the server's ss showed
// pacing_gain 2.89 throughout and 270-315 packets lost every 0.8 s after the
// second request only. A raised p still reaches a file at once: an idle
// connection takes the back half of a long request in flight
// (split_inflight).

uint64_t Job::Impl::split_min_bytes() const {
  return std::max<uint64_t>(spec.opts.split_min_bytes,
                            static_cast<uint64_t>(spec.opts.split_bdp_multiple * double(info.bdp_bytes)));
}

// A slow request's threshold is lower: a stream that would need more than
// split_seconds for the half is one the link is not waiting for (a loss-bound
// stream, a server's per-connection cap), and a second connection there adds
// its own rate rather than sharing one. A stream that fills the link fetches
// more than 8 BDP a second, so the byte rule stands for it. Measured on
// xfer-linkemu's lossy-wan (500 Mbit/s, 80 ms, 0.02% loss), 2 x 222 MB at
// p=3: each stream moved ~17 MB/s, and the byte rule (halves of 42 MB) left
// the last 80 MB of a file to one stream for up to 4.5 s. Not under a rate
// cap: there every stream is slowed by the cap, not by its path. In a floor
// job's tail (its last files on fewer streams than its channels) the cap
// holds nothing back unless its bucket held a write within the last half
// second: there the streams' rates are their paths' (issue 54: on a
// 0.02%-loss path a floor job's last file moved alone at 48 Mbit/s of 110
// under a cap of 113 that no write had met since its second look).
uint64_t Job::Impl::split_min_bytes(const Request& r, uint64_t now, bool tail) const {
  uint64_t least = split_min_bytes();
  const double ran_s = r.started_us && now > r.started_us ? double(now - r.started_us) / 1e6 : 0;
  const bool capped = current.rate_cap_bps > 0 && (!tail || (limit.held_us() && now < limit.held_us() + 500'000));
  if (capped || spec.opts.split_seconds <= 0 || ran_s < (tail ? 0.5 : 1.0)) return least;
  const double rate = double(r.pos - r.req_begin) / ran_s;
  const uint64_t floor = tail ? spec.opts.min_piece_bytes : spec.opts.split_min_bytes;
  // In the tail, a half that would outlast a control interval is split too
  // (the floor is judged per interval; at the daemon's 5 s this is the rule above).
  const double seconds =
      tail ? std::min(spec.opts.split_seconds, double(spec.opts.interval_ms) / 1e3) : spec.opts.split_seconds;
  return std::min(least, std::max<uint64_t>(floor, uint64_t(rate * seconds)));
}

bool Job::Impl::nothing_queued() const {
  for (const auto& c : chunks) {
    if (c->finished) continue;
    if (!c->fresh.empty() || !c->requeued.empty()) return false;
    for (const auto& ch : c->channels)
      if (!ch->queue.empty()) return false;
  }
  return true;
}

// An idle connection of the channel (p raised, or a sibling that finished
// first) with nothing queued for it: the request of the channel with the
// longest remainder ends half-way, and the back half is this connection's.
// The shortened request stops at its new end (write_cb), which on HTTP/1.1
// closes its connection (the server would send the rest); on HTTP/2 it
// resets the stream. Worth it only for a remainder of several BDPs, or of
// more than two seconds of a slow stream (above): the bytes already in
// flight past the cut are discarded, and the new connection starts cold.
//
// In the job's tail (nothing queued in any chunk: its last files are in
// flight on fewer streams than it has channels), when the tuner asks for it
// (Params::split_tail: the floor policies), the idle connection takes
// from any of its chunk's channels' requests, and a slow stream's remainder is split down
// to two seconds of it (min_piece_bytes at least): the rate a floor asked
// for holds to the last file rather than falling to what the last streams
// carry (issue 54: a floor job's last intervals moved 69, 73 and 36 Mbit/s
// of 120 with its other channels idle).
std::optional<Piece> Job::Impl::split_inflight(Channel& ch) {
  // The longest remainder among the requests worth splitting (each by its own
  // threshold: a back half just handed out has no rate yet, while the front
  // half it came from may still qualify).
  const uint64_t now = eng.now_us();
  Request* best = nullptr;
  auto consider = [&](const Connection& s, bool tail) {
    for (Request* r : s.inflight)
      if (r->kind == RequestKind::Get && r->end_known && r->file->ranges_ok && r->file->size &&
          r->file->state == FileTask::State::Active && r->end > r->pos &&
          r->end - r->pos >= 2 * split_min_bytes(*r, now, tail) && (!best || r->end - r->pos > best->end - best->pos))
        best = r;
  };
  for (auto& s : ch.connections) consider(*s, false);
  // In the tail, any chunk's stream (a chunk is busy while a file of its own
  // is in flight anywhere).
  if (!best && current.split_tail && nothing_queued())
    for (auto& c : chunks)
      if (!c->finished)
        for (auto& other : c->channels)
          for (auto& s : other->connections)
            if (s) consider(*s, true);
  if (!best) return std::nullopt;
  uint64_t mid = best->pos + (best->end - best->pos) / 2;
  Piece back{best->file, {mid, best->end}, best->file->gen, true, 0};
  log::debug("{}: bytes {}-{} go to an idle connection (split from a request at {})", best->file->entry->name, mid,
             best->end, best->pos);
  best->end = mid;
  best->shortened = true;
  return back;
}

// An idle connection whose chunk has nothing left to give takes the next
// piece of another chunk (its queued pieces, its retries, then its next
// file), when the tuner asks for it (Params::split_tail: the floor
// policies). The tuners give a finished chunk's channels to the chunks left
// at their next look; until then its connections would idle while the
// others' files wait, one behind another on their own channels (issue 54: a
// long-tailed set's small files ended half a second before the large ones,
// two of which were left on one channel: the last interval moved 37 Mbit/s
// of 110). Only onto an idle connection, so the borrowed files spread.
std::optional<Piece> Job::Impl::borrow_piece(Channel& ch, uint64_t now) {
  if (!current.split_tail) return std::nullopt;
  const Chunk& own = *ch.chunk;
  if (!own.fresh.empty() || !own.requeued.empty() || !ch.queue.empty()) return std::nullopt;
  for (auto& cp : chunks) {
    Chunk& c = *cp;
    if (&c == &own || c.finished) continue;
    for (auto& other : c.channels) {
      while (!other->queue.empty()) {
        Piece p = other->queue.front();
        other->queue.pop_front();
        if (piece_valid(p)) return p;
      }
    }
    Channel* home = c.channels.empty() ? nullptr : c.channels.front().get();
    if (!home) continue;
    // Its retries and fresh files as its own channel would take them (into
    // that channel's queue, its p pieces a file), the first one here.
    std::optional<Piece> p = take_piece(*home, now);
    if (p) return p;
    if (state != JobState::Running) return std::nullopt;
  }
  return std::nullopt;
}

std::optional<Piece> Job::Impl::take_piece(Channel& ch, uint64_t now) {
  while (!ch.queue.empty()) {
    Piece p = ch.queue.front();
    ch.queue.pop_front();
    if (piece_valid(p)) return p;
  }
  Chunk& c = *ch.chunk;
  for (auto it = c.requeued.begin(); it != c.requeued.end();) {
    if (!piece_valid(*it)) {
      it = c.requeued.erase(it);
    } else if (it->not_before_us <= now) {
      Piece p = *it;
      c.requeued.erase(it);
      return p;
    } else {
      arm_retry(it->not_before_us);  // backing off: come back when it is due
      ++it;
    }
  }
  // Each file once at most (one waiting for its name goes to the back).
  for (size_t n = c.fresh.size(); n > 0 && !c.fresh.empty(); --n) {
    FileTask* f = c.fresh.front();
    c.fresh.pop_front();
    if (f->state == FileTask::State::Pending && f->not_before_us > now) {
      c.fresh.push_back(f);
      arm_retry(f->not_before_us);
      continue;
    }
    // Back from a wait for its name: its final name may be there now.
    if (f->state == FileTask::State::Pending && f->busy_waits && settle_existing(*f)) continue;
    if (f->state != FileTask::State::Pending || !activate(f)) {
      if (state != JobState::Running) return std::nullopt;  // activate() may have ended the job
      continue;
    }
    queue_pieces(ch, f);
    return take_piece(ch, now);
  }
  return std::nullopt;
}

// Its requests go as HTTP/2 streams (release_rate_held: what libcurl may
// hold for one of them).
bool Job::Impl::multiplexed(const Connection& s, const FileTask& f) const {
  return origins.at(f.origin).h2 && !(s.http1 && s.tls);
}

void Job::Impl::start_get(Connection& s, const Piece& p) {
  FileTask* f = p.file;
  const bool https = f->origin.rfind("https:", 0) == 0;
  if (https && s.http1 && !s.tls) {
    Origin& o = origins.at(f->origin);
    if (o.h2 && !o.told_h1) {
      o.told_h1 = true;
      log::info("{}: HTTP/1.1 (ALPN) on connections that carry one request at a time (pp=1); HTTP/2 where pp > 1",
                f->origin);
    }
  }
  s.tls = s.tls || https;
  Request* r = new_request(RequestKind::Get, f, s.multi, s.http1);
  r->conn = &s;
  r->req_begin = r->pos = p.r.begin;
  r->started_us = eng.now_us();
  r->end = p.r.end;
  r->end_known = p.end_known;
  r->asked_under_cap = limit.active();
  if (p.end_known) size_receive_buffer(r, p.r.size());
  r->ranged = p.end_known && f->ranges_ok && !(p.r.begin == 0 && f->size && p.r.end == *f->size);
  if (r->ranged) {
    std::string range = std::to_string(p.r.begin) + "-" + std::to_string(p.r.end - 1);
    curl_easy_setopt(r->easy, CURLOPT_RANGE, range.c_str());
    // The rest of the version the file holds, or the whole new one (a 200,
    // which restarts the file: check_response).
    if (!f->part->validator().empty() && !origins.at(f->origin).if_range_ignored) {
      r->if_range = if_range_value(f->part->validator());
      r->headers = curl_slist_append(r->headers, ("If-Range: " + r->if_range).c_str());
      curl_easy_setopt(r->easy, CURLOPT_HTTPHEADER, r->headers);
    }
  }
  if (p.fresh_connection) curl_easy_setopt(r->easy, CURLOPT_FRESH_CONNECT, 1L);
  // A long body on HTTP/1.1 closes its connection when done: the next request
  // on it would restart a sender whose window has grown (see split_min_bytes),
  // and a new connection's slow start costs less than that. wan, 2 x 222 MB
  // one after the other (min-energy, cc=1): the second file ran at 355
  // Mbit/s on the reused connection, the first at 455.
  if (s.http1 && p.end_known && p.r.size() >= 2 * split_min_bytes()) curl_easy_setopt(r->easy, CURLOPT_FORBID_REUSE, 1L);
  s.inflight.push_back(r);
  s.used = true;
  ++f->inflight;
  transport->send(s.multi, r);
}

bool Job::Impl::channel_busy(const Channel& ch) {
  return std::any_of(ch.connections.begin(), ch.connections.end(), [](const auto& s) { return !s->inflight.empty(); });
}

// max_channels holds over all chunks, whatever the params ask (a static cc
// is per chunk: cc=16 on a mixed set's three chunks asked for 33 files in
// flight). An idle channel starts a file only while fewer channels than that
// are busy. Chunks are served Large to Small (and each chunk's files largest
// first, see begin_transfer): the longest files start first and the job
// ends on short ones, which is what shortens a job whose streams are each
// capped (by loss, or by the server), where a client working down its list
// ends on its last long file alone. A busy channel keeps its place for its
// next file.
std::map<std::string, int> Job::Impl::open_connections() const {
  std::map<std::string, int> open;
  if (origin_limit.empty()) return open;
  for (const auto& cp : chunks)
    for (const auto& ch : cp->channels)
      for (const auto& s : ch->connections)
        if (s && !s->inflight.empty() && origin_limit.count(s->inflight.front()->file->origin))
          ++open[s->inflight.front()->file->origin];
  return open;
}

// A lowered limit stops the newest requests over it at once (their rest goes
// back to the front of their chunks): a server that caps its clients'
// connections counts the ones open, not the ones we meant to close.
void Job::Impl::limit_connections(const std::map<std::string, int>& per_origin) {
  origin_limit = per_origin;
  std::map<std::string, int> open = open_connections();
  for (const auto& [origin, limit] : origin_limit) {
    int over = open[origin] - std::max(1, limit);
    if (over <= 0) continue;
    std::vector<Connection*> busy;
    for (const auto& cp : chunks)
      for (const auto& ch : cp->channels)
        for (const auto& s : ch->connections)
          if (s && !s->inflight.empty() && s->inflight.front()->file->origin == origin) busy.push_back(s.get());
    std::sort(busy.begin(), busy.end(), [](const Connection* a, const Connection* b) {
      return a->inflight.front()->started_us > b->inflight.front()->started_us;
    });
    log::info("{}: {} connections open, {} allowed now: the newest {} stop, their rest queued again", shown(origin, 128),
              open[origin], limit, over);
    for (int k = 0; k < over && k < int(busy.size()); ++k) drop_connection(*busy[k], true);
  }
  pump();
}

void Job::Impl::pump() {
  if (state != JobState::Running) return;
  uint64_t now = eng.now_us();
  std::map<std::string, int> open = open_connections();
  const size_t most = size_t(std::max(1, spec.opts.max_channels));
  size_t busy_channels = 0;
  for (auto& cp : chunks)
    for (auto& ch : cp->channels) busy_channels += channel_busy(*ch);
  for (auto cit = chunks.rbegin(); cit != chunks.rend(); ++cit) {
    Chunk& c = **cit;
    if (state != JobState::Running) return;
    if (c.finished) continue;
    reconcile(c);
    int pp = std::max(1, c.params.pp);
    for (auto& ch : c.channels) {
      const bool was_busy = channel_busy(*ch);
      if (!was_busy && busy_channels >= most) continue;  // no room left in max_channels
      if (!was_busy && !warm.empty()) adopt_warm(*ch);
      // Deal pieces round-robin over the channel's connections, so p pieces of a
      // file land on p different connections.
      bool dealt = true;
      while (dealt && state == JobState::Running) {
        dealt = false;
        for (auto& s : ch->connections) {
          if (!connection_has_room(*s, pp)) continue;
          std::optional<Piece> p = take_piece(*ch, now);
          if (!p && s->inflight.empty() && state == JobState::Running) p = borrow_piece(*ch, now);
          if (!p && s->inflight.empty() && state == JobState::Running) p = split_inflight(*ch);
          if (!p) break;
          if (!s->inflight.empty() && p->file->origin != s->inflight.front()->file->origin) {
            ch->queue.push_front(*p);  // a connection serves one origin
            continue;
          }
          const bool opens = s->inflight.empty();
          if (opens) {
            auto lim = origin_limit.find(p->file->origin);
            if (lim != origin_limit.end() && open[p->file->origin] >= std::max(1, lim->second)) {
              ch->queue.push_front(*p);  // the origin's connections are all in use
              break;
            }
          }
          Origin& o = origins.at(p->file->origin);
          if (pp > 1 && !o.h2 && !o.warned_h1) {
            o.warned_h1 = true;
            log::warn("{}: server speaks HTTP/1.1 only; pp={} becomes back-to-back requests on one reused "
                      "connection", p->file->origin, pp);
          }
          start_get(*s, *p);
          if (opens && origin_limit.count(p->file->origin)) ++open[p->file->origin];
          dealt = true;
        }
      }
      if (state != JobState::Running) return;
      if (!was_busy && channel_busy(*ch)) ++busy_channels;
      // Idle with nothing left in its chunk to take: its connections serve
      // the channels that start next (reconcile gives it fresh ones if its
      // chunk gets work back, a retry).
      if (!channel_busy(*ch) && ch->queue.empty() && c.fresh.empty() && c.requeued.empty()) {
        keep_warm(*ch);
        std::erase(ch->connections, nullptr);
      }
    }
    // A chunk is finished when nothing is queued, fresh or in flight. Files
    // still incomplete then (a lost piece) get their gaps queued again.
    bool busy = !c.fresh.empty() || !c.requeued.empty();
    for (auto& ch : c.channels) {
      busy = busy || !ch->queue.empty();
      for (auto& s : ch->connections) busy = busy || !s->inflight.empty();
    }
    // ...nor in flight on another chunk's channel that took it (borrow_piece).
    // Looked at only once the rest says idle: a chunk of 100,000 files is
    // looked at on every pump.
    if (!busy)
      for (size_t i : c.plan.files)
        if (files[i].inflight > 0) {
          busy = true;
          break;
        }
    if (!busy) {
      bool repaired = false;
      for (size_t i : c.plan.files) {
        FileTask* f = &files[i];
        if (f->state == FileTask::State::Active && f->inflight == 0 && f->size && !f->part->complete()) {
          for (const Range& g : f->part->received().missing(*f->size)) requeue(f, g, true, 0, false);
          repaired = true;
        }
      }
      if (repaired) {
        log::debug("chunk {}: re-queued gaps of incomplete files", to_string(c.plan.kind));
        pump();
        return;
      }
      c.finished = true;
      reconcile(c);  // closes its channels and connections
    }
  }
  maybe_finish_job();
}

// The server ignored a Range request: only one connection from byte 0 can fetch it.
void Job::Impl::restart_file(FileTask* f, const std::string& why, std::optional<uint64_t> size) {
  ++source_restarts;
  if (++f->source_changes > kMaxSourceChanges) {
    fail_file(f, why + "; it changed " + std::to_string(f->source_changes) + " times while it was fetched");
    return;
  }
  log::warn("{}: {}: the {} bytes fetched of the earlier version are discarded, and the file starts again from zero",
            f->entry->name, why, f->part->received().bytes());
  if (!start_over(f)) return;
  if (size && !f->entry->size && size != f->size) {
    uint64_t old = f->size.value_or(0);
    f->chunk->bytes_total += *size - old;
    bytes_total += *size - old;
    f->size = size;
    f->part->set_size(*size);
  }
  requeue(f, {0, f->size.value_or(0)}, f->size.has_value(), 0, true);
}

// A connection can go silent without ever failing: a server whose worker
// stopped mid-body, a middlebox that forgot the flow without a reset. The
// socket stays open, TCP waits as long as it is asked to, and libcurl's
// low-speed check (stall_timeout_s, 30 s) is slow to say so or, for a
// request it does not time, silent. A connection none of whose requests has
// received a byte for reissue_after_s (40 RTTs when longer: a long path's
// losses back off that long) while its job runs is given up here (the whole
// connection: on HTTP/1.1 the requests behind the first wait for it, and on
// HTTP/2 one stream waits while its siblings move), its requests' ranges
// asked again at the front of their chunk on new connections; each such
// give-up counts as a failure without progress of the file, so a server
// that never answers fails the file after max_retries. A paced socket
// (SO_RCVLOWAT) is first woken at every byte once, in case its mark holds a
// tail that will not grow. A connection with a request held by the rate cap
// is not watched: the cap, not the server, holds it.
void Job::Impl::reissue_stalled(uint64_t now) {
  if (state != JobState::Running) return;
  const uint64_t limit = uint64_t(std::max(spec.opts.reissue_after_s, 40 * info.rtt_s) * 1e6);
  // Only time the loop was free to receive counts: a tick that comes late
  // (the loop busy with a long Submit, the process stopped) counts as one
  // on time, or every connection would look silent after it.
  const uint64_t tick = uint64_t(spec.opts.record_ms) * 1000;
  const uint64_t step = !watched_us ? 0 : std::min(now - watched_us, 2 * tick);
  watched_us = now;
  std::map<Connection*, std::vector<Request*>> by_conn;
  for (auto& [r, owned] : requests)
    if (r->kind == RequestKind::Get && r->conn) by_conn[r->conn].push_back(r);
  std::vector<Request*> stalled;
  for (auto& [conn, rs] : by_conn) {
    bool held = false;
    for (Request* r : rs) held = held || r->rate_paused;
    if (held || conn->heard != conn->watched_bytes) {
      conn->watched_bytes = conn->heard;
      conn->still_us = 0;
      continue;
    }
    if ((conn->still_us += step) < limit) continue;
    bool woken = false;
    for (Request* r : rs)
      if (r->paced && r->lowat > 1 && r->fd >= 0) {
        int one = 1;
        setsockopt(r->fd, SOL_SOCKET, SO_RCVLOWAT, &one, sizeof one);
        r->lowat = 1;
        r->paced = false;
        woken = true;
        log::info("{}: bytes {}-{}: nothing for {:.1f} s; its socket wakes at every byte now", r->file->entry->name,
                  r->pos, r->end, double(limit) / 1e6);
      }
    if (woken) {
      conn->still_us = 0;
      continue;
    }
    stalled.insert(stalled.end(), rs.begin(), rs.end());
  }
  for (Request* r : stalled) {
    FileTask* f = r->file;
    Range rest{r->pos, r->end};
    const bool end_known = r->end_known;
    ++requests_reissued;
    preempt(r, false);
    if (f->state != FileTask::State::Active) continue;
    if (end_known && rest.begin >= rest.end) {  // it had every byte it asked for: no failure
      maybe_finish_file(f);
      continue;
    }
    std::string why = "nothing received for " + fmt::format("{:.1f}", double(limit) / 1e6) + " s";
    if (++f->failures > spec.opts.max_retries) {
      fail_file(f, why + " (after " + std::to_string(f->failures) + " attempts)");
      continue;
    }
    log::warn("{}: bytes {}-{}: {}; asked again on a new connection", f->entry->name, rest.begin, rest.end, why);
    if (end_known) {
      requeue(f, rest, true, 0, true, true);
    } else {
      try {
        reset_file(f);
      } catch (const IoError& e) {
        io_failed(f, e);
        continue;
      }
      requeue(f, {0, 0}, false, 0, true, true);
    }
  }
  if (!stalled.empty()) pump();
}

void Job::Impl::collapse_to_one_connection(FileTask* f) {
  log::warn("{}: server ignores Range requests; fetching it whole on one connection", f->entry->name);
  f->ranges_ok = false;
  if (start_over(f)) requeue(f, {0, *f->size}, true, 0, true);
}

void Job::Impl::stop_requests(FileTask* f) {
  for (auto it = requests.begin(); it != requests.end();) {
    Request* r = (it++)->first;
    if (r->file == f && r->kind == RequestKind::Get) preempt(r, false);
  }
}

bool Job::Impl::start_over(FileTask* f) {
  stop_requests(f);
  try {
    reset_file(f);
  } catch (const IoError& e) {
    io_failed(f, e);
    return false;
  }
  return true;
}

}  // namespace xfer
