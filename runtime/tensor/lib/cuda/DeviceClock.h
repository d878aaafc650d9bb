//===- DeviceClock.h - GPU event times on the host's clock ------*- C++ -*-===//
//
// Device-time trace events (docs/plan.md, `--trace`): a CUDA event only
// says how long after another event it completed (cudaEventElapsedTime, in
// float milliseconds), so each traced stream records an anchor event whose
// host time it knows and places every later event relative to it. The
// arithmetic lives here, CUDA-free, so the CPU build tests it.
//
//===----------------------------------------------------------------------===//
#ifndef MONARCH_TENSOR_LIB_CUDA_DEVICECLOCK_H
#define MONARCH_TENSOR_LIB_CUDA_DEVICECLOCK_H

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>

namespace monarch::tensor::detail {

/// The executor's trace clock: steady_clock is CLOCK_MONOTONIC on Linux, so
/// times of different worker processes of a host compare.
inline int64_t traceNowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// An anchor event's completion on the host clock. It is recorded on an
/// idle stream between two host readings (before the record, after its
/// completion was seen), so it completed in between; the midpoint is off by
/// at most half of that window.
struct ClockAnchor {
  int64_t hostNs = 0;    ///< estimated completion time
  int64_t errorNs = 0;   ///< half the window: the bound on the estimate's error
  int64_t takenAtNs = 0; ///< when the host finished taking it
};

inline ClockAnchor anchorBetween(int64_t beforeNs, int64_t afterNs) {
  if (afterNs < beforeNs)
    std::swap(beforeNs, afterNs);
  int64_t half = (afterNs - beforeNs) / 2;
  return {beforeNs + half, half, afterNs};
}

/// The host time of an event completed `elapsedMs` after the anchor
/// (negative or non-finite values clamp to the anchor: events recorded after
/// it cannot complete before it).
inline int64_t hostTimeOf(const ClockAnchor &anchor, float elapsedMs) {
  if (!std::isfinite(elapsedMs) || elapsedMs < 0)
    return anchor.hostNs;
  return anchor.hostNs + std::llround(static_cast<double>(elapsedMs) * 1e6);
}

/// A device span [start, end] on the host clock; end never precedes start
/// (the two readings round independently).
struct HostSpan {
  int64_t startNs, endNs;
};

inline HostSpan hostSpanOf(const ClockAnchor &anchor, float startMs,
                           float endMs) {
  int64_t s = hostTimeOf(anchor, startMs);
  return {s, std::max(s, hostTimeOf(anchor, endMs))};
}

/// When a stream takes a new anchor. Elapsed times are float milliseconds
/// (24-bit mantissa: ~60 ns resolution a second after the anchor, ~60 us
/// after 1000 s) and the GPU's clock drifts from the host's, so an anchor
/// serves a bounded age; a new one costs nothing only on an idle stream
/// (it completes at once), so it is taken then, or after `hardMaxAge`
/// whatever it costs.
struct AnchorPolicy {
  int64_t softMaxAgeNs = 1'000'000'000;  ///< renew when idle past this
  int64_t hardMaxAgeNs = 60'000'000'000; ///< renew, waiting if need be
};

enum class AnchorAction { Keep, Renew, RenewAfterDrain };

inline AnchorAction anchorAction(const AnchorPolicy &policy,
                                 const ClockAnchor *anchor, int64_t nowNs,
                                 bool streamIdle) {
  if (!anchor)
    return streamIdle ? AnchorAction::Renew : AnchorAction::RenewAfterDrain;
  int64_t age = nowNs - anchor->takenAtNs;
  if (age >= policy.hardMaxAgeNs)
    return streamIdle ? AnchorAction::Renew : AnchorAction::RenewAfterDrain;
  if (age >= policy.softMaxAgeNs && streamIdle)
    return AnchorAction::Renew;
  return AnchorAction::Keep;
}

} // namespace monarch::tensor::detail

#endif // MONARCH_TENSOR_LIB_CUDA_DEVICECLOCK_H
