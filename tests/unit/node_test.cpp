// control/node: the parts a node's jobs share. The kernel layer is opened
// for the first job that may turn it, shared by every such job, and closed
// (the cores restored) when the last of them is retired; on a fake sysfs
// tree of four cores, so nothing of the machine changes. No job is started.
#include "xfer/node.h"

#include <gtest/gtest.h>
#include <systemd/sd-event.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <type_traits>

#include "fake_cpus.h"
#include "service.h"

namespace fs = std::filesystem;

// xferd runs its jobs on a Node, as run_job_set (the arbiter's tests and
// xfer-bench's contention scenarios) does: one type serves both.
static_assert(std::is_same_v<decltype(xferd::Service::node), xfer::Node>);

struct NodeTest : ::testing::Test {
  NodeTest() {
    sd_event_new(&ev);
    std::string tmpl = (fs::temp_directory_path() / "xfer-node-XXXXXX").string();
    if (mkdtemp(tmpl.data())) dest = tmpl;
  }
  ~NodeTest() override {
    sd_event_unref(ev);
    fs::remove_all(dest);
  }
  // A job that is never started: one entry, a fixed setting.
  xfer::RunningJobSpec spec(uint32_t id, const std::string& algorithm = "static") {
    xfer::RunningJobSpec s;
    s.id = id;
    s.algorithm = algorithm;
    s.job.manifest.entries.push_back({"http://127.0.0.1:9/f" + std::to_string(id), 1000, "", "f" + std::to_string(id), 1});
    s.job.dest_dir = dest;
    s.kernel_range = cpus.layer_config();
    return s;
  }
  xfer::Node::Config config() const {
    xfer::Node::Config c;
    c.flows = xfer::Node::Config::Flows::Off;
    return c;
  }
  FakeCpuTree cpus;
  sd_event* ev = nullptr;
  std::string dest;
};

TEST_F(NodeTest, TheKernelLayerIsOpenedForTheFirstJobAndClosedAfterTheLast) {
  xfer::Node node(ev, config());
  const xfer::KernelLayer::Config kc = cpus.layer_config();
  EXPECT_EQ(node.kernel(), nullptr) << "opened before any job asked";
  std::string note = "unset";
  std::unique_ptr<xfer::RunningJob> a = node.run(spec(1), nullptr, &kc, &note);
  EXPECT_EQ(note, "");
  ASSERT_NE(node.kernel(), nullptr);
  EXPECT_TRUE(a->holds_kernel());
  xfer::KernelLayer* layer = node.kernel();
  EXPECT_EQ(layer->apply(1, 0), "");
  EXPECT_EQ(cpus.online(), 1);
  EXPECT_TRUE(fs::exists(cpus.state)) << "journalled before the change";

  std::unique_ptr<xfer::RunningJob> b = node.run(spec(2), nullptr, &kc, &note);
  EXPECT_EQ(node.kernel(), layer) << "a second layer over the first";
  EXPECT_EQ(node.kernel_users(), 2u);
  std::unique_ptr<xfer::RunningJob> app = node.run(spec(3), nullptr, nullptr, &note);
  EXPECT_FALSE(app->holds_kernel()) << "a job whose policy tunes the application layer only";
  EXPECT_EQ(node.kernel_users(), 2u);

  node.retire(a);
  EXPECT_EQ(a, nullptr);
  EXPECT_EQ(node.kernel(), layer) << "closed while job 2 holds it";
  EXPECT_EQ(cpus.online(), 1);
  node.retire(app);
  EXPECT_EQ(node.kernel(), layer);
  node.retire(b);
  EXPECT_EQ(node.kernel(), nullptr);
  EXPECT_EQ(cpus.online(), 4) << "the last job out restores the cores";
  EXPECT_FALSE(fs::exists(cpus.state));
}

TEST_F(NodeTest, AJobThatCannotBeBuiltLeavesNoLayerOpen) {
  xfer::Node node(ev, config());
  const xfer::KernelLayer::Config kc = cpus.layer_config();
  std::string note;
  EXPECT_THROW(node.run(spec(1, "no-such-policy"), nullptr, &kc, &note), std::invalid_argument);
  EXPECT_EQ(node.kernel(), nullptr);
  EXPECT_EQ(node.kernel_users(), 0u);
  EXPECT_FALSE(fs::exists(cpus.state));
  // With one job holding it, the failed one changes nothing.
  std::unique_ptr<xfer::RunningJob> a = node.run(spec(2), nullptr, &kc, &note);
  EXPECT_THROW(node.run(spec(3, "no-such-policy"), nullptr, &kc, &note), std::invalid_argument);
  EXPECT_NE(node.kernel(), nullptr);
  EXPECT_EQ(node.kernel_users(), 1u);
  node.retire(a);
  EXPECT_EQ(node.kernel(), nullptr);
}

TEST_F(NodeTest, ALayerThatCannotOpenLetsTheJobRunOnTheApplicationLayerAndSaysWhy) {
  xfer::Node node(ev, config());
  xfer::KernelLayer::Config kc = cpus.layer_config();
  std::ofstream(kc.state_file) << "not a journal";  // left as it is: the layer does not open
  std::string note;
  std::unique_ptr<xfer::RunningJob> a = node.run(spec(1), nullptr, &kc, &note);
  EXPECT_FALSE(a->holds_kernel());
  EXPECT_NE(note.find("kernel layer off for this job"), std::string::npos) << note;
  EXPECT_EQ(node.kernel(), nullptr);
  node.retire(a);
  EXPECT_EQ(cpus.read("state.json"), "not a journal");
}
