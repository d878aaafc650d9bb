//===- Liveness.cpp - Heartbeats and hang detection -----------------------===//

#include "monarch/runtime/proc/Liveness.h"

#include "monarch/runtime/proc/Runtime.h"
#include "monarch/runtime/util/Log.h"

#include <asio.hpp>

#include <cstdlib>

namespace monarch {

namespace {

int64_t nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::chrono::milliseconds envMs(const char *name,
                                std::chrono::milliseconds fallback) {
  const char *text = std::getenv(name);
  if (!text || !*text)
    return fallback;
  char *end = nullptr;
  long long v = std::strtoll(text, &end, 10);
  if (*end != '\0' || v < 0) {
    log::warning("ignoring $", name, "='", text,
                 "' (not a number of milliseconds)");
    return fallback;
  }
  return std::chrono::milliseconds(v);
}

/// Sends one heartbeat per interval over its own link to the parent.
class Beat : public std::enable_shared_from_this<Beat> {
public:
  Beat(Runtime &rt, const proto::Bootstrap &boot)
      : timer(rt.transport().io()), interval(boot.heartbeat_ms()) {
    beat.envelope.set_dest_port(boot.heartbeat_port());
    beat.envelope.mutable_heartbeat()->set_rank(boot.rank());
    auto addr = transport::ChannelAddr::parse(boot.parent_addr());
    if (addr.ok())
      link = rt.transport().connect(*addr);
  }

  void start() {
    if (!link)
      return;
    send();
  }

private:
  void send() {
    if (link->isClosed())
      return; // the parent is gone; the data link's close ends the worker
    link->send(beat);
    timer.expires_after(interval);
    timer.async_wait([self = shared_from_this()](asio::error_code ec) {
      if (!ec)
        self->send();
    });
  }

  asio::steady_timer timer;
  std::chrono::milliseconds interval;
  std::shared_ptr<transport::Link> link;
  transport::Message beat;
};

} // namespace

LivenessOptions LivenessOptions::fromEnvironment() {
  LivenessOptions options;
  options.interval = envMs("MONARCH_HEARTBEAT_MS", options.interval);
  options.deadline = envMs("MONARCH_UNRESPONSIVE_MS", options.deadline);
  return options;
}

void HeartbeatSender::start(Runtime &rt, const proto::Bootstrap &boot) {
  if (boot.heartbeat_ms() == 0 || boot.heartbeat_port() == 0)
    return;
  auto beat = std::make_shared<Beat>(rt, boot);
  // The first heartbeat goes out at once; the timer keeps the sender alive.
  asio::post(rt.transport().io(), [beat] { beat->start(); });
}

struct LivenessMonitor::Timer {
  explicit Timer(asio::io_context &io) : timer(io) {}
  asio::steady_timer timer;
};

LivenessMonitor::LivenessMonitor(asio::io_context &io, size_t ranks,
                                 LivenessOptions options, Report onSilent,
                                 Report onBack)
    : io(io), timer(std::make_shared<Timer>(io)), options(options),
      onSilent(std::move(onSilent)), onBack(std::move(onBack)),
      lastSeen(ranks), state(ranks) {}

LivenessMonitor::~LivenessMonitor() {
  // asio timers are not thread-safe: cancel on the io thread; the pending
  // wait holds the timer until then.
  asio::post(io, [t = timer] { t->timer.cancel(); });
}

void LivenessMonitor::heard(uint32_t rank) {
  if (rank >= lastSeen.size())
    return;
  int64_t now = nowNs();
  int64_t before = lastSeen[rank].exchange(now);
  uint8_t silent = 1;
  if (state[rank].compare_exchange_strong(silent, 0) && onBack &&
      !stopped.load())
    onBack(rank, (now - before) / 1000000);
}

void LivenessMonitor::start() {
  if (!options.enabled())
    return;
  int64_t now = nowNs();
  for (auto &seen : lastSeen)
    seen.store(now);
  asio::post(io, [self = shared_from_this()] {
    self->lastCheck = nowNs();
    self->arm();
  });
}

void LivenessMonitor::forget(uint32_t rank) {
  if (rank < state.size())
    state[rank].store(2);
}

void LivenessMonitor::stop() {
  stopped.store(true);
  // The timer belongs to the io thread; cancelling from another one would
  // race its handler, so the handler sees `stopped` and does not re-arm.
}

void LivenessMonitor::arm() {
  if (stopped.load())
    return;
  auto period = std::min(options.interval, options.deadline / 4);
  if (period.count() <= 0)
    period = std::chrono::milliseconds(1);
  std::weak_ptr<LivenessMonitor> weak = shared_from_this();
  timer->timer.expires_after(period);
  timer->timer.async_wait([weak, t = timer](asio::error_code ec) {
    if (auto self = weak.lock(); self && !ec)
      self->check();
  });
}

void LivenessMonitor::check() {
  if (stopped.load())
    return;
  int64_t now = nowNs();
  int64_t deadlineNs = options.deadline.count() * 1000000;
  auto period = std::min(options.interval, options.deadline / 4);
  int64_t late = now - lastCheck - period.count() * 1000000;
  lastCheck = now;
  // This check ran late: this process was not running (or its io loop was
  // held), and the heartbeats of that time may still be unread. It is not
  // the procs' silence; look again next time, when they have been read.
  if (late > deadlineNs / 4) {
    log::debug("liveness check ", late / 1000000,
               " ms late; not judging the procs this time");
    arm();
    return;
  }
  for (size_t r = 0; r < lastSeen.size(); ++r) {
    int64_t silentNs = now - lastSeen[r].load();
    uint8_t live = 0;
    if (silentNs > deadlineNs && state[r].compare_exchange_strong(live, 1) &&
        onSilent)
      onSilent(static_cast<uint32_t>(r), silentNs / 1000000);
  }
  arm();
}

} // namespace monarch
