// control/control_loop.cpp: observe -> decide -> apply -> record, with a fake
// tuner and a fake flow monitor, on a job served by an in-process HTTP server
// on loopback (no namespace, no nginx).
#include <gtest/gtest.h>
#include <systemd/sd-event.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "flaky_server.h"
#include "xfer/manifest.h"
#include "xfer/control_loop.h"

namespace fs = std::filesystem;

namespace {

// Every owned socket is a flow that has received 10 kB more at each look,
// at a 25 ms RTT; a disowned one is reported closed once.
class FakeFlows : public xfer::FlowMonitor {
 public:
  std::string source() const override { return "fake"; }
  uint64_t own(int fd, uint32_t job) override {
    uint64_t id = next_++;
    open_[fd] = {id, job, 0};
    return id;
  }
  void disown(int fd) override {
    auto it = open_.find(fd);
    if (it == open_.end()) return;
    closed_.push_back(it->second);
    open_.erase(it);
  }
  std::vector<xfer::FlowCounters> flows(uint32_t job) override {
    std::vector<xfer::FlowCounters> out;
    auto add = [&](Flow& f, bool closed) {
      if (f.job != job) return;
      if (!closed) f.bytes += 10000;
      xfer::FlowCounters c;
      c.id = f.id, c.job = job, c.bytes_received = f.bytes, c.rtt_ms = 25, c.closed = closed;
      out.push_back(c);
    };
    for (auto& [fd, f] : open_) add(f, false);
    for (Flow& f : closed_) add(f, true);
    closed_.clear();
    return out;
  }
  Overhead overhead() const override { return {}; }

 private:
  struct Flow {
    uint64_t id;
    uint32_t job;
    uint64_t bytes;
  };
  uint64_t next_ = 1;
  std::map<int, Flow> open_;
  std::vector<Flow> closed_;
};

// One channel per chunk at first; two from its second decision on. It keeps
// what it was shown.
class FakeTuner : public xfer::Tuner {
 public:
  std::vector<xfer::Observation>* seen;
  explicit FakeTuner(std::vector<xfer::Observation>* s) : seen(s) {}
  std::string name() const override { return "fake"; }
  xfer::Params init(const xfer::StartFacts& info) override {
    xfer::Params p;
    p.chunks.assign(info.chunks.size(), xfer::ChunkParams{1, 1, 1});
    p.reason = "start";
    return p;
  }
  std::optional<xfer::Params> decide(const xfer::Observation& o) override {
    seen->push_back(o);
    if (seen->size() != 2) return std::nullopt;
    xfer::Params p = o.params;
    for (auto& c : p.chunks) c.cc = 2;
    p.reason = "two";
    return p;
  }
};

}  // namespace

TEST(ControlLoop, ObservesDecidesAppliesAndRecordsEachInterval) {
  xtest::FlakyServer server(std::string(200000, 'x'));
  std::string manifest;
  for (int i = 0; i < 12; ++i)
    manifest += "http://127.0.0.1:" + std::to_string(server.port) + "/trickle/f" + std::to_string(i) + " 200000\n";
  fs::path dest = fs::temp_directory_path() / ("control-loop-test-" + std::to_string(getpid()));
  fs::remove_all(dest);
  fs::create_directories(dest);

  sd_event* ev = nullptr;
  ASSERT_GE(sd_event_new(&ev), 0);
  FakeFlows flows;
  std::vector<xfer::Observation> seen;
  std::vector<xfer::IntervalRecord> records;
  xfer::JobProgress end;
  {
    xfer::Engine engine(ev);
    xfer::EngineOptions opts;
    opts.interval_ms = 200;
    xfer::Job job(engine, xfer::Job::Spec{xfer::parse_manifest(manifest, "<test>"), dest.string(), opts});
    job.set_flow_monitor(&flows, 1);
    xfer::ControlLoop loop(engine, job, std::make_unique<FakeTuner>(&seen), {&flows, nullptr, nullptr, 1});
    loop.on_interval = [&](const xfer::IntervalRecord& r) { records.push_back(r); };
    job.on_finished = [&] { sd_event_exit(ev, 0); };
    job.start();
    sd_event_loop(ev);
    end = job.progress();
    EXPECT_EQ(loop.timeline().size(), records.size());
  }
  sd_event_unref(ev);
  fs::remove_all(dest);

  ASSERT_EQ(end.state, xfer::JobState::Done);
  ASSERT_GE(records.size(), 3u) << "the job took too few intervals to judge";
  uint64_t sum = 0, last_fetched = 0;
  for (size_t i = 0; i < records.size(); ++i) {
    const xfer::IntervalRecord& r = records[i];
    SCOPED_TRACE("interval " + std::to_string(i));
    sum += r.obs.bytes_interval;
    // Each record carries the job's progress and chunks at its end.
    EXPECT_GE(r.progress.bytes_fetched, last_fetched);
    last_fetched = r.progress.bytes_fetched;
    EXPECT_EQ(r.obs.bytes_done, r.progress.bytes_done);
    ASSERT_EQ(r.chunks.size(), r.obs.chunks.size());
    // The flows' figures come through the accountant.
    ASSERT_TRUE(r.obs.flow.has_value());
    if (r.obs.flow->bytes > 0) {
      EXPECT_DOUBLE_EQ(r.obs.flow->rtt_ms, 25);
    }
    // The params in effect are what was decided before.
    if (i > 0) {
      const xfer::IntervalRecord& before = records[i - 1];
      EXPECT_EQ(r.obs.params.chunks, (before.decided ? *before.decided : before.obs.params).chunks);
    }
  }
  EXPECT_EQ(sum, end.bytes_fetched) << "every byte is in exactly one interval (the tail included)";
  EXPECT_EQ(end.bytes_fetched, 12u * 200000);
  // The second decision was applied: the job's chunks ran at cc 2 after it.
  ASSERT_GE(seen.size(), 2u);
  ASSERT_TRUE(records[1].decided.has_value());
  EXPECT_EQ(records[1].decided->reason, "two");
  ASSERT_GE(records.size(), 3u);
  for (const xfer::ChunkStatus& c : records[2].chunks) EXPECT_EQ(c.params.cc, 2);
  // The first observation of the set-up is marked as settling; so is the one after a change.
  EXPECT_TRUE(seen.front().settling);
  ASSERT_GE(seen.size(), 3u);
  EXPECT_TRUE(seen[2].settling);
}
