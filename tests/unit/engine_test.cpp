// libxfer/engine/engine.cpp and xfer/engine.h: what holds of a job's states
// without a transfer.
#include <gtest/gtest.h>

#include "xfer/engine.h"

// A job's end is final (issue 37: Resume set a finished job running again).
TEST(JobState, AnEndIsFinal) {
  using S = xfer::JobState;
  for (S end : {S::Done, S::Failed, S::Cancelled})
    for (S to : {S::Queued, S::Discovering, S::Running, S::Paused, S::Done, S::Failed, S::Cancelled})
      EXPECT_FALSE(xfer::may_change(end, to)) << xfer::to_string(end) << " -> " << xfer::to_string(to);
  EXPECT_TRUE(xfer::may_change(S::Running, S::Paused));
  EXPECT_TRUE(xfer::may_change(S::Paused, S::Running));
  EXPECT_TRUE(xfer::may_change(S::Paused, S::Queued));
  EXPECT_FALSE(xfer::may_change(S::Running, S::Queued));
  EXPECT_TRUE(xfer::may_change(S::Running, S::Done));
}
