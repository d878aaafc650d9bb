//===- DeviceClockTest.cpp - GPU event times on the host clock ------------===//
//
// The arithmetic of device-time trace events (runtime/tensor/lib/cuda/
// DeviceClock.h), which runs on CPU: anchoring, conversion of elapsed
// milliseconds to host nanoseconds, and when a stream takes a new anchor.
// The CUDA side using it is tested on a GPU (CudaExecutorTest, DeviceTrace).
//
//===----------------------------------------------------------------------===//

#include "../../../runtime/tensor/lib/cuda/DeviceClock.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

using namespace monarch::tensor::detail;

TEST(DeviceClock, AnchorIsTheMidpointOfItsWindowWithHalfItAsError) {
  ClockAnchor a = anchorBetween(1'000, 1'600);
  EXPECT_EQ(a.hostNs, 1'300);
  EXPECT_EQ(a.errorNs, 300);
  EXPECT_EQ(a.takenAtNs, 1'600);
  // Readings in either order give the same anchor.
  ClockAnchor b = anchorBetween(1'600, 1'000);
  EXPECT_EQ(b.hostNs, a.hostNs);
  EXPECT_EQ(b.errorNs, a.errorNs);
}

TEST(DeviceClock, ElapsedMillisecondsBecomeHostNanosecondsAfterTheAnchor) {
  ClockAnchor a = anchorBetween(5'000'000'000, 5'000'000'010);
  EXPECT_EQ(hostTimeOf(a, 0.f), 5'000'000'005);
  EXPECT_EQ(hostTimeOf(a, 1.5f), 5'001'500'005);
  // Float milliseconds keep sub-microsecond resolution for a second.
  EXPECT_NEAR(hostTimeOf(a, 999.9995f) - a.hostNs, 999'999'500, 100);
}

TEST(DeviceClock, ImpossibleElapsedTimesClampToTheAnchor) {
  ClockAnchor a = anchorBetween(100, 200);
  EXPECT_EQ(hostTimeOf(a, -0.25f), a.hostNs);
  EXPECT_EQ(hostTimeOf(a, std::numeric_limits<float>::quiet_NaN()), a.hostNs);
  EXPECT_EQ(hostTimeOf(a, std::numeric_limits<float>::infinity()), a.hostNs);
}

TEST(DeviceClock, SpansNeverEndBeforeTheyStart) {
  ClockAnchor a = anchorBetween(0, 0);
  HostSpan s = hostSpanOf(a, 2.0f, 3.25f);
  EXPECT_EQ(s.startNs, 2'000'000);
  EXPECT_EQ(s.endNs, 3'250'000);
  // The two readings are independent; one of an empty span may come back
  // a rounding step before the other: the span collapses to its start.
  HostSpan r = hostSpanOf(a, 2.001f, 2.0f);
  EXPECT_EQ(r.startNs, 2'001'000);
  EXPECT_EQ(r.endNs, r.startNs);
}

TEST(DeviceClock, FirstAnchorIsTakenAtOnceOnAnIdleStreamElseAfterADrain) {
  AnchorPolicy p;
  EXPECT_EQ(anchorAction(p, nullptr, 0, true), AnchorAction::Renew);
  EXPECT_EQ(anchorAction(p, nullptr, 0, false), AnchorAction::RenewAfterDrain);
}

TEST(DeviceClock, AgedAnchorsAreRenewedWhenIdleAndForcedWhenTooOld) {
  AnchorPolicy p;
  p.softMaxAgeNs = 1'000;
  p.hardMaxAgeNs = 10'000;
  ClockAnchor a = anchorBetween(0, 100); // taken at 100
  // Young: kept, busy or idle.
  EXPECT_EQ(anchorAction(p, &a, 500, true), AnchorAction::Keep);
  EXPECT_EQ(anchorAction(p, &a, 500, false), AnchorAction::Keep);
  // Past the soft age: renewed only where it is free (an idle stream).
  EXPECT_EQ(anchorAction(p, &a, 1'100, true), AnchorAction::Renew);
  EXPECT_EQ(anchorAction(p, &a, 1'100, false), AnchorAction::Keep);
  // Past the hard age: renewed even on a busy stream, after draining it.
  EXPECT_EQ(anchorAction(p, &a, 10'100, false), AnchorAction::RenewAfterDrain);
  EXPECT_EQ(anchorAction(p, &a, 10'100, true), AnchorAction::Renew);
}
