// control/kernel_share: the kernel layer serving every job at once, on a
// fake sysfs tree of four cores (plain files: nothing of the machine changes).
#include "xfer/kernel_share.h"

#include <gtest/gtest.h>

#include "fake_cpus.h"

using xfer::JobClass;

// The most any job asks for is set; a background job's ask counts only when
// no other job asks; a job that leaves takes its ask with it; the layer
// restores the machine when it goes.
TEST(KernelShare, TheMostAnyJobAsksIsSetAndALeavingJobTakesItsAskAway) {
  FakeCpuTree cpus;
  {
    xfer::KernelLayer layer(cpus.layer_config());
    xfer::KernelShare share(layer);
    cpus.online();
    EXPECT_EQ(share.ask(1, JobClass::Normal, 1, 0), "");  // least energy
    EXPECT_EQ(cpus.online(), 1);
    EXPECT_EQ(share.ask(2, JobClass::Normal, 3, 0), "");  // a job that needs three
    EXPECT_EQ(cpus.online(), 3);
    EXPECT_NE(share.reason().find("3 cores for job 2 (the most any of 2 jobs asks)"), std::string::npos)
        << share.reason();
    EXPECT_EQ(share.ask(3, JobClass::Background, 4, 0), "");  // background: not while others ask
    EXPECT_EQ(cpus.online(), 3);
    share.leave(2);
    EXPECT_EQ(cpus.online(), 1);
    share.leave(1);
    EXPECT_EQ(cpus.online(), 4);  // only the background job asks now
    EXPECT_EQ(share.jobs(), 1u);
    share.ask(3, JobClass::Background, 2, 0);
    EXPECT_EQ(cpus.online(), 2);
  }
  EXPECT_EQ(cpus.online(), 4);  // restored with the layer
}

// A job's tuner is told its policy's range of the shared layer.
TEST(KernelShare, EachJobIsToldItsPolicysRange) {
  FakeCpuTree cpus;
  xfer::KernelLayer layer(cpus.layer_config());
  xfer::KernelShare share(layer);
  xfer::KernelLayer::Config policy = cpus.layer_config();
  policy.min_cores = 2;
  policy.max_cores = 3;
  xfer::KernelCaps c = share.caps_for(policy);
  EXPECT_EQ(c.cores_present, 3);
  EXPECT_EQ(c.min_cores, 2);
  EXPECT_EQ(share.caps_for(cpus.layer_config()).cores_present, 4);
}
