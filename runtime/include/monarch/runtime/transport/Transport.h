//===- Transport.h - One interface over inproc, Unix and TCP ----*- C++ -*-===//
//
// A Link is an outgoing, one-way, FIFO channel to a listener address; the
// listener hands every whole message it receives to a MessageHandler. Socket
// links authenticate (Auth.h) before any message is written, and a listener
// drops a connection -- never the process -- on a bad frame.
//
// Threading: all socket work runs on the transport's io_context (one thread);
// send() may be called from any thread. An idle socket link writes a message
// straight from the sending thread (one non-blocking sendmsg) and leaves only
// what the socket did not take to the io thread; dense fire-and-forget
// traffic goes through the io thread, which batches it into one writev.
// Message::awaited (a call or a reply) always takes the direct write when the
// link is idle. Handlers run on the io thread -- or on a thread that borrowed
// its io context (proc/IoLoop.h), or, for inproc, on the sender's thread --
// and must not block.
//
// Flow control: a socket connection stops reading while more than
// maxUnhandledBytes of what it delivered is still held (Message::credit), so
// the peer's writes stall in the kernel and its link's queue grows; a sender
// calls Link::waitForRoom before sending, which waits (bounded) while that
// queue holds more than maxQueuedBytes. Memory stays bounded on both sides
// without dropping or reordering anything. inproc:// has no queue to bound.
//
//===----------------------------------------------------------------------===//
#ifndef MONARCH_RUNTIME_TRANSPORT_TRANSPORT_H
#define MONARCH_RUNTIME_TRANSPORT_TRANSPORT_H

#include "monarch/runtime/transport/ChannelAddr.h"
#include "monarch/runtime/transport/Frame.h"
#include "monarch/runtime/transport/Message.h"

#include <chrono>
#include <functional>
#include <memory>

namespace asio {
class io_context;
}

namespace monarch::transport {

using MessageHandler = std::function<void(Message &&)>;
using CloseHandler = std::function<void(const Status &)>;

class Link {
public:
  virtual ~Link() = default;
  /// Queues the message; messages of one Link arrive in send order. After the
  /// link closed, messages are dropped (the close handler has reported it).
  virtual void send(Message message) = 0;
  /// Waits until the link's send queue holds at most maxQueuedBytes, up to
  /// `timeout` (then a Timeout error; nothing is dropped). Returns at once on
  /// the transport's io thread, which must never wait, and on a closed link.
  virtual Status waitForRoom(std::chrono::milliseconds timeout) {
    (void)timeout;
    return Status::ok();
  }
  /// Bytes queued and not yet written to the socket.
  virtual size_t queuedBytes() const { return 0; }
  /// Runs once when the link closes (at once if it already has).
  virtual void onClose(CloseHandler handler) = 0;
  virtual bool isClosed() const = 0;
  virtual void close() = 0;
  virtual const ChannelAddr &peer() const = 0;
};

class Listener {
public:
  virtual ~Listener() = default;
  /// The bound address (port 0 and inproc://0 are resolved).
  virtual const ChannelAddr &addr() const = 0;
  virtual void close() = 0;
};

struct TransportOptions {
  std::string secret;
  FrameLimits limits;
  /// A connection that has not authenticated within this time is closed.
  int handshakeTimeoutMs = 5000;
  /// Connections of one listener that may be proving the secret at once;
  /// past it the oldest of them is closed (see SocketListener::admit). Each
  /// holds at most one read (4 KiB) and a Handshake-sized frame.
  size_t maxPendingHandshakes = 64;
  /// A link whose queue holds more than this makes waitForRoom wait.
  size_t maxQueuedBytes = 64u << 20;
  /// A connection holding more than this of delivered, unhandled bytes stops
  /// reading until half of it is released.
  size_t maxUnhandledBytes = 64u << 20;
};

class Transport {
public:
  Transport(asio::io_context &io, TransportOptions options);
  ~Transport();
  Transport(const Transport &) = delete;
  Transport &operator=(const Transport &) = delete;

  Expected<std::unique_ptr<Listener>> listen(const ChannelAddr &addr,
                                             MessageHandler handler);
  /// Connects in the background; sends queue until the handshake is done.
  std::shared_ptr<Link> connect(const ChannelAddr &addr);

  asio::io_context &io() { return ioContext; }
  const TransportOptions &options() const { return opts; }

private:
  asio::io_context &ioContext;
  TransportOptions opts;
};

} // namespace monarch::transport

#endif // MONARCH_RUNTIME_TRANSPORT_TRANSPORT_H
