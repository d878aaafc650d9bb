//===- Transport.cpp - Socket and inproc links
//------------------------------===//
//
// One implementation of Link/Listener templated over asio's stream protocols
// (TCP and Unix-domain sockets), plus the in-process registry behind inproc://.
//
//===----------------------------------------------------------------------===//
#include "monarch/runtime/transport/Transport.h"

#include "monarch/runtime/transport/Auth.h"
#include "monarch/runtime/transport/FrameDecoder.h"
#include "monarch/runtime/util/Log.h"

#include <asio.hpp>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <set>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>
#include <unordered_map>
#include <utility>

namespace monarch::transport {

namespace {

using Tcp = asio::ip::tcp;
using UnixSocket = asio::local::stream_protocol;

Expected<Tcp::endpoint> tcpEndpoint(const ChannelAddr &addr) {
  std::string host = addr.host == "localhost" ? "127.0.0.1" : addr.host;
  asio::error_code ec;
  auto ip = asio::ip::make_address(host, ec);
  if (ec)
    return Status(ErrorCode::Invalid,
                  "tcp host must be a numeric address: " + addr.host);
  return Tcp::endpoint(ip, addr.port);
}

template <typename Protocol>
Expected<typename Protocol::endpoint> endpointOf(const ChannelAddr &addr);
template <> Expected<Tcp::endpoint> endpointOf<Tcp>(const ChannelAddr &addr) {
  return tcpEndpoint(addr);
}
template <>
Expected<UnixSocket::endpoint> endpointOf<UnixSocket>(const ChannelAddr &addr) {
  return UnixSocket::endpoint(addr.host);
}

/// Every socket is close-on-exec: a process this one starts must not hold
/// its listeners or connections (a worker holding the controller's listening
/// socket keeps it reachable after the controller died). asio opens and
/// accepts without SOCK_CLOEXEC, so this runs right after; the launcher also
/// closes every inherited descriptor in the child (LocalProcLauncher), which
/// covers the moment between the two.
template <typename Socket> void closeOnExec(Socket &socket) {
  int fd = socket.native_handle();
  if (fd >= 0)
    ::fcntl(fd, F_SETFD, ::fcntl(fd, F_GETFD) | FD_CLOEXEC);
}

template <typename Socket> void tuneSocket(Socket &) {}
template <> void tuneSocket<Tcp::socket>(Tcp::socket &socket) {
  asio::error_code ec;
  socket.set_option(Tcp::no_delay(true), ec);
}

/// Reads whole control frames of type T during the handshake.
template <typename T, typename Socket, typename Self, typename Fail,
          typename Done>
void readControl(Socket &socket, FrameDecoder &decoder, Self self, Fail fail,
                 Done done) {
  auto got = decoder.nextControl<T>();
  if (!got.ok())
    return fail(got.status());
  if (got->has_value())
    return done(std::move(**got));
  constexpr size_t chunk = 4096;
  auto [into, room] = decoder.prepareRead(chunk);
  socket.async_read_some(
      asio::buffer(into, room),
      [&socket, &decoder, self, fail, done](asio::error_code ec, size_t n) {
        if (ec)
          return fail(
              Status(ErrorCode::Closed,
                     "connection closed during handshake: " + ec.message()));
        decoder.commit(n);
        readControl<T>(socket, decoder, self, fail, done);
      });
}

std::vector<asio::const_buffer>
gatherBuffers(const std::vector<EncodedMessage> &batch) {
  std::vector<asio::const_buffer> bufs;
  for (const auto &m : batch) {
    bufs.emplace_back(m.control.data(), m.control.size());
    for (size_t i = 0; i < m.payloads.size(); ++i) {
      bufs.emplace_back(m.payloadHeaders.data() + kFrameHeaderSize * i,
                        kFrameHeaderSize);
      bufs.emplace_back(m.payloads[i].data(), m.payloads[i].size());
    }
  }
  return bufs;
}

//===----------------------------------------------------------------------===//
// Client side: an outgoing link.
//===----------------------------------------------------------------------===//

template <typename Protocol>
class SocketLink : public Link,
                   public std::enable_shared_from_this<SocketLink<Protocol>> {
public:
  SocketLink(asio::io_context &io, ChannelAddr peer, TransportOptions options)
      : io(io), socket(io), timer(io), peerAddr(std::move(peer)),
        opts(std::move(options)), decoder(kHandshakeLimits) {}

  void start() {
    auto self = this->shared_from_this();
    asio::post(io, [self] { self->doConnect(); });
  }

  void send(Message message) override {
    bool awaited = message.awaited;
    auto encoded = encodeMessage(std::move(message), opts.limits);
    if (!encoded.ok()) {
      log::error("dropping message to ", peerAddr.toString(), ": ",
                 encoded.status().toString());
      return;
    }
    std::lock_guard<std::mutex> guard(mu);
    if (state == State::Closed)
      return;
    // Fast path: an idle, open link writes from the caller's thread, saving
    // the hand-off to the io thread (a wake-up per message on the latency
    // path). Whatever the socket does not take at once goes the slow way.
    // Dense fire-and-forget traffic (a send within the last few
    // microseconds) goes through the io thread instead, which batches it
    // into one writev. An awaited message (a call or a reply) always takes
    // the fast path: a round trip shorter than the density window must not
    // turn every call into an io-thread hand-off.
    size_t written = 0;
    auto now = std::chrono::steady_clock::now();
    bool sparse = now - lastSend > std::chrono::microseconds(50);
    lastSend = now;
    if ((sparse || awaited) && state == State::Open && !writing &&
        queue.empty())
      written = writeNow(*encoded);
    if (written == encoded->totalBytes())
      return;
    // Only the fast path writes, and only with nothing queued or in flight:
    // the rest of this message goes first. A message that did not take it
    // must leave skipBytes alone, since the io thread may hold the previous
    // one's partial write in flight, with its skip taken but not applied.
    if (written > 0)
      skipBytes = written;
    unwrittenBytes += encoded->totalBytes() - written;
    queue.push_back(std::move(*encoded));
    if (state == State::Open && !writing) {
      writing = true;
      auto self = this->shared_from_this();
      asio::post(io, [self] { self->writeSome(); });
    }
  }

  void onClose(CloseHandler handler) override {
    Status already;
    {
      std::lock_guard<std::mutex> guard(mu);
      if (state != State::Closed) {
        closeHandlers.push_back(std::move(handler));
        return;
      }
      already = closeReason;
    }
    handler(already);
  }

  bool isClosed() const override {
    std::lock_guard<std::mutex> guard(mu);
    return state == State::Closed;
  }

  Status waitForRoom(std::chrono::milliseconds timeout) override {
    // The common case, a link with room, takes no lock.
    if (unwrittenBytes.load(std::memory_order_relaxed) <= opts.maxQueuedBytes)
      return Status::ok();
    if (io.get_executor().running_in_this_thread())
      return Status::ok(); // the io thread drains the queue; it never waits
    std::unique_lock<std::mutex> lock(mu);
    if (roomCv.wait_for(lock, timeout, [&] {
          return state == State::Closed ||
                 unwrittenBytes <= opts.maxQueuedBytes;
        }))
      return Status::ok();
    return Status(ErrorCode::Timeout,
                  "link to " + peerAddr.toString() + " still holds " +
                      std::to_string(unwrittenBytes.load()) +
                      " unwritten bytes after " +
                      std::to_string(timeout.count()) +
                      " ms (the receiver is not keeping up)");
  }

  size_t queuedBytes() const override {
    std::lock_guard<std::mutex> guard(mu);
    return unwrittenBytes;
  }

  void close() override {
    auto self = this->shared_from_this();
    asio::post(io, [self] {
      self->fail(Status(ErrorCode::Closed, "link closed locally"));
    });
  }

  const ChannelAddr &peer() const override { return peerAddr; }

private:
  enum class State { Connecting, Open, Closed };

  void doConnect() {
    auto self = this->shared_from_this();
    auto endpoint = endpointOf<Protocol>(peerAddr);
    if (!endpoint.ok())
      return fail(endpoint.status());
    timer.expires_after(std::chrono::milliseconds(opts.handshakeTimeoutMs));
    timer.async_wait([self](asio::error_code ec) {
      if (!ec && self->currentState() == State::Connecting)
        self->fail(Status(ErrorCode::Timeout, "handshake with " +
                                                  self->peerAddr.toString() +
                                                  " timed out"));
    });
    asio::error_code opened;
    socket.open(endpoint->protocol(), opened);
    if (opened)
      return fail(Status(ErrorCode::Closed, "cannot open a socket to " +
                                                peerAddr.toString() + ": " +
                                                opened.message()));
    closeOnExec(socket);
    socket.async_connect(*endpoint, [self](asio::error_code ec) {
      if (ec)
        return self->fail(
            Status(ErrorCode::Closed, "cannot connect to " +
                                          self->peerAddr.toString() + ": " +
                                          ec.message()));
      tuneSocket(self->socket);
      self->readChallenge();
    });
  }

  void readChallenge() {
    auto self = this->shared_from_this();
    auto failFn = [self](const Status &s) { self->fail(s); };
    readControl<proto::Handshake>(
        socket, decoder, self, failFn, [self](proto::Handshake challenge) {
          if (challenge.nonce().size() != kNonceBytes)
            return self->fail(
                Status(ErrorCode::Auth, "server sent a bad challenge"));
          self->ownNonce = randomBytes(kNonceBytes);
          proto::Handshake answer;
          answer.set_mac(
              handshakeMac(self->opts.secret, kClientLabel, challenge.nonce()));
          answer.set_nonce(self->ownNonce);
          auto frame =
              std::make_shared<std::string>(encodeControlFrame(answer));
          asio::async_write(self->socket, asio::buffer(*frame),
                            [self, frame](asio::error_code ec, size_t) {
                              if (ec)
                                return self->fail(Status(
                                    ErrorCode::Closed,
                                    "handshake write failed: " + ec.message()));
                              self->readProof();
                            });
        });
  }

  void readProof() {
    auto self = this->shared_from_this();
    auto failFn = [self](const Status &s) { self->fail(s); };
    readControl<proto::Handshake>(
        socket, decoder, self, failFn, [self](proto::Handshake proof) {
          if (!macEquals(proof.mac(),
                         handshakeMac(self->opts.secret, kServerLabel,
                                      self->ownNonce)))
            return self->fail(
                Status(ErrorCode::Auth, "server " + self->peerAddr.toString() +
                                            " failed to prove the job secret"));
          self->timer.cancel();
          {
            std::lock_guard<std::mutex> guard(self->mu);
            self->state = State::Open;
            self->writing = !self->queue.empty();
          }
          self->watchForClose();
          self->writeSome();
        });
  }

  /// The server never writes after the handshake; a read completes only on
  /// EOF or error, which is how a dead peer is noticed at once.
  void watchForClose() {
    auto self = this->shared_from_this();
    socket.async_read_some(
        asio::buffer(watchByte, 1), [self](asio::error_code ec, size_t) {
          self->fail(Status(
              ErrorCode::Closed,
              "connection to " + self->peerAddr.toString() +
                  (ec ? " closed: " + ec.message() : " got unexpected bytes")));
        });
  }

  /// Non-blocking vectored write of one message; returns the bytes taken.
  size_t writeNow(const EncodedMessage &m) {
    if (m.payloads.size() > 256)
      return 0;
    std::vector<iovec> iov;
    iov.reserve(1 + 2 * m.payloads.size());
    iov.push_back({const_cast<char *>(m.control.data()), m.control.size()});
    for (size_t i = 0; i < m.payloads.size(); ++i) {
      iov.push_back(
          {const_cast<char *>(m.payloadHeaders.data()) + kFrameHeaderSize * i,
           kFrameHeaderSize});
      if (m.payloads[i].size())
        iov.push_back({const_cast<uint8_t *>(m.payloads[i].data()),
                       m.payloads[i].size()});
    }
    msghdr hdr{};
    hdr.msg_iov = iov.data();
    hdr.msg_iovlen = iov.size();
    ssize_t n =
        ::sendmsg(socket.native_handle(), &hdr, MSG_DONTWAIT | MSG_NOSIGNAL);
    // Errors (and EAGAIN) leave the message to the io thread, which reports.
    return n > 0 ? static_cast<size_t>(n) : 0;
  }

  void writeSome() {
    size_t skip = 0;
    {
      std::lock_guard<std::mutex> guard(mu);
      if (state != State::Open) {
        writing = false;
        return;
      }
      size_t bytes = 0;
      while (!queue.empty() && inflight.size() < 256 && bytes < (4u << 20)) {
        bytes += queue.front().totalBytes();
        inflight.push_back(std::move(queue.front()));
        queue.pop_front();
      }
      // skipBytes of the first message are written already and not counted.
      skip = std::exchange(skipBytes, 0);
      inflightBytes = bytes - std::min(bytes, skip);
      if (inflight.empty()) {
        writing = false;
        return;
      }
    }
    auto self = this->shared_from_this();
    auto buffers = gatherBuffers(inflight);
    // Bytes of the first message the fast path already wrote.
    size_t first = 0;
    while (skip > 0 && first < buffers.size()) {
      size_t take = std::min(skip, buffers[first].size());
      buffers[first] += take;
      skip -= take;
      if (buffers[first].size() == 0)
        ++first;
    }
    buffers.erase(buffers.begin(), buffers.begin() + first);
    asio::async_write(socket, buffers, [self](asio::error_code ec, size_t) {
      self->inflight.clear();
      {
        std::lock_guard<std::mutex> guard(self->mu);
        self->unwrittenBytes -=
            std::min(self->unwrittenBytes.load(), self->inflightBytes);
        self->inflightBytes = 0;
      }
      self->roomCv.notify_all();
      if (ec)
        return self->fail(
            Status(ErrorCode::Closed, "write to " + self->peerAddr.toString() +
                                          " failed: " + ec.message()));
      self->writeSome();
    });
  }

  State currentState() const {
    std::lock_guard<std::mutex> guard(mu);
    return state;
  }

  void fail(const Status &reason) {
    std::vector<CloseHandler> handlers;
    {
      std::lock_guard<std::mutex> guard(mu);
      if (state == State::Closed)
        return;
      state = State::Closed;
      closeReason = reason;
      queue.clear();
      unwrittenBytes = 0;
      handlers.swap(closeHandlers);
    }
    roomCv.notify_all();
    asio::error_code ignored;
    timer.cancel();
    socket.close(ignored);
    log::debug("link to ", peerAddr.toString(), " closed: ", reason.toString());
    for (auto &h : handlers)
      h(reason);
  }

  asio::io_context &io;
  typename Protocol::socket socket;
  asio::steady_timer timer;
  ChannelAddr peerAddr;
  TransportOptions opts;
  FrameDecoder decoder;
  std::string ownNonce;
  char watchByte[1];

  mutable std::mutex mu;
  State state = State::Connecting;
  bool writing = false;
  size_t skipBytes = 0; // of queue.front(), already written by writeNow
  std::chrono::steady_clock::time_point lastSend;
  std::deque<EncodedMessage> queue;
  std::vector<EncodedMessage> inflight; // touched only on the io thread
  // Queued or in flight, not yet written; changed under `mu`, read without.
  std::atomic<size_t> unwrittenBytes{0};
  size_t inflightBytes = 0; // of unwrittenBytes, in the write under way
  std::condition_variable roomCv;
  std::vector<CloseHandler> closeHandlers;
  Status closeReason;
};

//===----------------------------------------------------------------------===//
// Server side: an accepted connection and the listener.
//===----------------------------------------------------------------------===//

/// Counts the bytes a connection delivered that are still held somewhere
/// (each read's bytes are one credit, shared by the messages it completed).
/// Reading pauses above the limit and resumes once half of it is released.
class ReadFlow : public std::enable_shared_from_this<ReadFlow> {
public:
  ReadFlow(size_t limit, std::function<void()> resume)
      : limit(limit), resume(std::move(resume)) {}

  /// A credit for `bytes` just read; released when its last holder is gone.
  std::shared_ptr<const void> take(size_t bytes) {
    held.fetch_add(bytes, std::memory_order_relaxed);
    auto self = shared_from_this();
    return std::shared_ptr<const void>(
        nullptr, [self, bytes](const void *) { self->release(bytes); });
  }

  /// On the io thread, before the next read: true if reading must pause.
  bool pauseIfFull() {
    if (held.load(std::memory_order_acquire) <= limit)
      return false;
    paused.store(true, std::memory_order_seq_cst);
    // A release may have brought it low before `paused` was visible.
    if (held.load(std::memory_order_seq_cst) <= limit / 2 &&
        paused.exchange(false))
      return false;
    return true;
  }

private:
  void release(size_t bytes) {
    size_t now = held.fetch_sub(bytes, std::memory_order_seq_cst) - bytes;
    if (now <= limit / 2 && paused.load(std::memory_order_seq_cst) &&
        paused.exchange(false))
      resume();
  }

  const size_t limit;
  std::function<void()> resume;
  std::atomic<size_t> held{0};
  std::atomic<bool> paused{false};
};

template <typename Protocol>
class ServerConnection
    : public std::enable_shared_from_this<ServerConnection<Protocol>> {
public:
  ServerConnection(typename Protocol::socket socket,
                   const TransportOptions &opts,
                   std::shared_ptr<MessageHandler> handler)
      : socket(std::move(socket)), timer(this->socket.get_executor()),
        opts(opts), decoder(kHandshakeLimits), handler(std::move(handler)) {}

  void start() {
    auto self = this->shared_from_this();
    std::weak_ptr<ServerConnection> weak = self;
    auto executor = socket.get_executor();
    flow = std::make_shared<ReadFlow>(opts.maxUnhandledBytes, [weak, executor] {
      asio::post(executor, [weak] {
        if (auto conn = weak.lock()) {
          conn->pausedSelf.reset();
          if (conn->socket.is_open())
            conn->readMore();
        }
      });
    });
    closeOnExec(socket);
    tuneSocket(socket);
    timer.expires_after(std::chrono::milliseconds(opts.handshakeTimeoutMs));
    timer.async_wait([self](asio::error_code ec) {
      if (!ec && !self->authenticated)
        self->drop("handshake timed out");
    });
    nonce = randomBytes(kNonceBytes);
    proto::Handshake challenge;
    challenge.set_nonce(nonce);
    auto frame = std::make_shared<std::string>(encodeControlFrame(challenge));
    asio::async_write(socket, asio::buffer(*frame),
                      [self, frame](asio::error_code ec, size_t) {
                        if (ec)
                          return self->drop("handshake write failed");
                        self->readAnswer();
                      });
  }

  void close() {
    asio::error_code ignored;
    timer.cancel();
    socket.close(ignored);
    pausedSelf.reset();
  }

  /// Still proving the secret (counts against the listener's cap).
  bool pendingHandshake() const { return !authenticated && socket.is_open(); }
  /// Closes a connection that had not authenticated yet, to make room.
  void evict(const char *why) {
    log::warning("closing an unauthenticated connection: ", why);
    close();
  }

private:
  void readAnswer() {
    auto self = this->shared_from_this();
    auto failFn = [self](const Status &s) { self->drop(s.toString()); };
    readControl<proto::Handshake>(
        socket, decoder, self, failFn, [self](proto::Handshake answer) {
          if (!macEquals(
                  answer.mac(),
                  handshakeMac(self->opts.secret, kClientLabel, self->nonce))) {
            log::warning("refusing connection: peer failed to prove the job "
                         "secret");
            return self->drop("");
          }
          if (answer.nonce().size() != kNonceBytes)
            return self->drop("bad client nonce");
          proto::Handshake proof;
          proof.set_mac(
              handshakeMac(self->opts.secret, kServerLabel, answer.nonce()));
          auto frame = std::make_shared<std::string>(encodeControlFrame(proof));
          asio::async_write(self->socket, asio::buffer(*frame),
                            [self, frame](asio::error_code ec, size_t) {
                              if (ec)
                                return self->drop("handshake write failed");
                              self->authenticated = true;
                              self->timer.cancel();
                              // Only now may frames be as large as
                              // messages need.
                              self->decoder.setLimits(self->opts.limits);
                              self->readMessages();
                            });
        });
  }

  /// Delivers the whole messages buffered, each holding a credit for the
  /// bytes read since the last delivery (a large message arrives over many
  /// reads), then reads on unless the connection holds too much unhandled
  /// data.
  void readMessages() {
    std::shared_ptr<const void> credit;
    for (;;) {
      auto next = decoder.nextMessage();
      if (!next.ok())
        return drop(next.status().toString());
      if (!next->has_value())
        break;
      if (!credit && uncredited > 0) {
        credit = flow->take(uncredited);
        uncredited = 0;
      }
      (**next).credit = credit;
      (*handler)(std::move(**next));
    }
    credit.reset();
    if (flow->pauseIfFull()) {
      // No read is pending now, so nothing else keeps the connection; the
      // release that brings it below half resumes reading.
      pausedSelf = this->shared_from_this();
      return;
    }
    readMore();
  }

  void readMore() {
    auto self = this->shared_from_this();
    constexpr size_t chunk = 64 * 1024;
    auto [into, room] = decoder.prepareRead(chunk);
    socket.async_read_some(
        asio::buffer(into, room), [self](asio::error_code ec, size_t n) {
          if (ec) {
            // EOF is the normal end of a peer.
            if (ec != asio::error::eof && ec != asio::error::operation_aborted)
              log::debug("connection ended: ", ec.message());
            return self->close();
          }
          self->decoder.commit(n);
          self->uncredited += n;
          self->readMessages();
        });
  }

  void drop(const std::string &why) {
    if (!why.empty())
      log::error("closing connection: ", why);
    close();
  }

  typename Protocol::socket socket;
  asio::steady_timer timer;
  TransportOptions opts;
  FrameDecoder decoder;
  std::shared_ptr<MessageHandler> handler;
  std::shared_ptr<ReadFlow> flow;
  /// Bytes read that no delivered message holds a credit for yet.
  size_t uncredited = 0;
  std::shared_ptr<ServerConnection> pausedSelf; // set while reading pauses
  std::string nonce;
  bool authenticated = false;
};

template <typename Protocol>
class SocketListener
    : public Listener,
      public std::enable_shared_from_this<SocketListener<Protocol>> {
public:
  SocketListener(asio::io_context &io, const TransportOptions &opts,
                 MessageHandler handler)
      : io(io), acceptor(io), retryTimer(io), opts(opts),
        handler(std::make_shared<MessageHandler>(std::move(handler))) {}
  ~SocketListener() override { closeNow(); }

  Status bind(const ChannelAddr &addr) {
    auto endpoint = endpointOf<Protocol>(addr);
    if (!endpoint.ok())
      return endpoint.status();
    asio::error_code ec;
    if constexpr (std::is_same_v<Protocol, UnixSocket>)
      ::unlink(addr.host.c_str());
    acceptor.open(endpoint->protocol(), ec);
    if (!ec)
      closeOnExec(acceptor);
    if (!ec && std::is_same_v<Protocol, Tcp>)
      acceptor.set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec)
      acceptor.bind(*endpoint, ec);
    if (!ec)
      acceptor.listen(asio::socket_base::max_listen_connections, ec);
    if (ec)
      return Status(ErrorCode::Invalid, "cannot listen on " + addr.toString() +
                                            ": " + ec.message());
    bound = addr;
    if constexpr (std::is_same_v<Protocol, Tcp>)
      bound.port = acceptor.local_endpoint().port();
    return Status::ok();
  }

  void startAccepting() {
    std::weak_ptr<SocketListener> weak = this->shared_from_this();
    acceptor.async_accept([weak](asio::error_code ec,
                                 typename Protocol::socket socket) {
      auto self = weak.lock();
      if (!self || ec == asio::error::operation_aborted)
        return;
      if (ec)
        return self->acceptFailed(ec);
      self->backoff = std::chrono::milliseconds(0);
      self->admit(std::move(socket));
      self->startAccepting();
    });
  }

  const ChannelAddr &addr() const override { return bound; }

  void close() override {
    auto self = this->shared_from_this();
    asio::post(io, [self] { self->closeNow(); });
  }

private:
  /// Starts serving an accepted connection. Unauthenticated connections are
  /// capped per listener: past the cap the oldest one still in its handshake
  /// is closed, so a flood of silent connections can neither hold unbounded
  /// memory nor keep the next legitimate one out (its handshake takes a
  /// round trip, far less than it takes a flood to push it to the front).
  void admit(typename Protocol::socket socket) {
    auto conn = std::make_shared<ServerConnection<Protocol>>(std::move(socket),
                                                             opts, handler);
    connections.erase(std::remove_if(connections.begin(), connections.end(),
                                     [](const auto &w) { return w.expired(); }),
                      connections.end());
    connections.push_back(conn);
    prunePending();
    while (!pending.empty() && pending.size() >= opts.maxPendingHandshakes)
      evictOldest("too many connections are proving the job secret");
    pending.push_back(conn);
    conn->start();
  }

  void prunePending() {
    pending.erase(std::remove_if(pending.begin(), pending.end(),
                                 [](const auto &w) {
                                   auto c = w.lock();
                                   return !c || !c->pendingHandshake();
                                 }),
                  pending.end());
  }

  bool evictOldest(const char *why) {
    prunePending();
    if (pending.empty())
      return false;
    if (auto oldest = pending.front().lock())
      oldest->evict(why);
    pending.pop_front();
    return true;
  }

  /// accept() failed. Out of descriptors (EMFILE/ENFILE) or memory, the
  /// pending connection stays in the kernel's queue and accept would fail
  /// again at once: a tight loop. So first free a descriptor by closing the
  /// oldest unauthenticated connection (a flood's, most likely) and retry;
  /// with none to close, retry after a back-off (1 ms doubling to 1 s) that
  /// a successful accept resets. Other errors concern one connection only.
  void acceptFailed(const asio::error_code &ec) {
    bool exhausted = ec == asio::error::no_descriptors ||
                     ec.value() == ENFILE || ec == asio::error::no_memory ||
                     ec == asio::error::no_buffer_space;
    if (!exhausted) {
      log::debug("accept failed: ", ec.message());
      return startAccepting();
    }
    if (evictOldest("out of file descriptors"))
      return startAccepting();
    backoff = std::min<std::chrono::milliseconds>(
        std::max<std::chrono::milliseconds>(backoff * 2,
                                            std::chrono::milliseconds(1)),
        std::chrono::seconds(1));
    if (backoff == std::chrono::milliseconds(1) ||
        backoff == std::chrono::seconds(1))
      log::warning("cannot accept connections on ", bound.toString(), ": ",
                   ec.message(), "; retrying in ", backoff.count(), " ms");
    std::weak_ptr<SocketListener> weak = this->shared_from_this();
    retryTimer.expires_after(backoff);
    retryTimer.async_wait([weak](asio::error_code timerEc) {
      auto self = weak.lock();
      if (self && !timerEc && self->acceptor.is_open())
        self->startAccepting();
    });
  }

  void closeNow() {
    asio::error_code ignored;
    retryTimer.cancel();
    if (acceptor.is_open()) {
      acceptor.close(ignored);
      if constexpr (std::is_same_v<Protocol, UnixSocket>)
        ::unlink(bound.host.c_str());
    }
    for (auto &weak : connections)
      if (auto conn = weak.lock())
        conn->close();
    connections.clear();
  }

  asio::io_context &io;
  typename Protocol::acceptor acceptor;
  asio::steady_timer retryTimer;
  TransportOptions opts;
  std::shared_ptr<MessageHandler> handler;
  ChannelAddr bound;
  std::vector<std::weak_ptr<ServerConnection<Protocol>>> connections;
  /// Connections still in their handshake, oldest first (io thread only).
  std::deque<std::weak_ptr<ServerConnection<Protocol>>> pending;
  std::chrono::milliseconds backoff{0};
};

/// Owns the shared listener; closing it from the owner's side.
template <typename Protocol> class ListenerHandle : public Listener {
public:
  explicit ListenerHandle(std::shared_ptr<SocketListener<Protocol>> impl)
      : impl(std::move(impl)) {}
  ~ListenerHandle() override { impl->close(); }
  const ChannelAddr &addr() const override { return impl->addr(); }
  void close() override { impl->close(); }

private:
  std::shared_ptr<SocketListener<Protocol>> impl;
};

//===----------------------------------------------------------------------===//
// inproc://N: direct hand-off inside the process.
//===----------------------------------------------------------------------===//

class InprocRegistry {
public:
  static InprocRegistry &instance() {
    static InprocRegistry registry;
    return registry;
  }
  uint64_t add(uint64_t wanted, std::shared_ptr<MessageHandler> handler) {
    std::lock_guard<std::mutex> guard(mu);
    uint64_t id = wanted ? wanted : nextId++;
    if (handlers.count(id))
      return 0;
    handlers[id] = std::move(handler);
    return id;
  }
  void remove(uint64_t id) {
    std::lock_guard<std::mutex> guard(mu);
    handlers.erase(id);
  }
  std::shared_ptr<MessageHandler> find(uint64_t id) {
    std::lock_guard<std::mutex> guard(mu);
    auto it = handlers.find(id);
    return it == handlers.end() ? nullptr : it->second;
  }

private:
  std::mutex mu;
  uint64_t nextId = 1u << 20;
  std::unordered_map<uint64_t, std::shared_ptr<MessageHandler>> handlers;
};

class InprocListener : public Listener {
public:
  explicit InprocListener(ChannelAddr addr) : bound(std::move(addr)) {}
  ~InprocListener() override { close(); }
  const ChannelAddr &addr() const override { return bound; }
  void close() override { InprocRegistry::instance().remove(bound.id); }

private:
  ChannelAddr bound;
};

class InprocLink : public Link {
public:
  explicit InprocLink(ChannelAddr peer) : peerAddr(std::move(peer)) {}

  void send(Message message) override {
    auto handler = InprocRegistry::instance().find(peerAddr.id);
    if (!handler) {
      markClosed(Status(ErrorCode::Closed,
                        "no inproc listener at " + peerAddr.toString()));
      return;
    }
    // Same process: the payloads are handed over without any copy. The lock
    // keeps concurrent senders on one link in a single order.
    std::lock_guard<std::mutex> guard(sendMu);
    (*handler)(std::move(message));
  }
  void onClose(CloseHandler handler) override {
    std::unique_lock<std::mutex> guard(mu);
    if (!closed) {
      handlers.push_back(std::move(handler));
      return;
    }
    Status reason = closeReason;
    guard.unlock();
    handler(reason);
  }
  bool isClosed() const override {
    std::lock_guard<std::mutex> guard(mu);
    return closed;
  }
  void close() override {
    markClosed(Status(ErrorCode::Closed, "link closed locally"));
  }
  const ChannelAddr &peer() const override { return peerAddr; }

private:
  void markClosed(const Status &reason) {
    std::vector<CloseHandler> toRun;
    {
      std::lock_guard<std::mutex> guard(mu);
      if (closed)
        return;
      closed = true;
      closeReason = reason;
      toRun.swap(handlers);
    }
    for (auto &h : toRun)
      h(reason);
  }

  ChannelAddr peerAddr;
  mutable std::mutex mu;
  std::mutex sendMu;
  bool closed = false;
  Status closeReason;
  std::vector<CloseHandler> handlers;
};

} // namespace

Transport::Transport(asio::io_context &io, TransportOptions options)
    : ioContext(io), opts(std::move(options)) {}

Transport::~Transport() = default;

template <typename Protocol>
static Expected<std::unique_ptr<Listener>>
listenOn(asio::io_context &io, const TransportOptions &opts,
         const ChannelAddr &addr, MessageHandler handler) {
  auto listener =
      std::make_shared<SocketListener<Protocol>>(io, opts, std::move(handler));
  Status bound = listener->bind(addr);
  if (!bound.isOk())
    return bound;
  listener->startAccepting();
  return std::unique_ptr<Listener>(
      std::make_unique<ListenerHandle<Protocol>>(std::move(listener)));
}

Expected<std::unique_ptr<Listener>> Transport::listen(const ChannelAddr &addr,
                                                      MessageHandler handler) {
  switch (addr.kind) {
  case TransportKind::Inproc: {
    uint64_t id = InprocRegistry::instance().add(
        addr.id, std::make_shared<MessageHandler>(std::move(handler)));
    if (id == 0)
      return Status(ErrorCode::Invalid, addr.toString() + " is in use");
    return std::unique_ptr<Listener>(
        std::make_unique<InprocListener>(ChannelAddr::inproc(id)));
  }
  case TransportKind::Unix:
    return listenOn<UnixSocket>(ioContext, opts, addr, std::move(handler));
  case TransportKind::Tcp:
    return listenOn<Tcp>(ioContext, opts, addr, std::move(handler));
  }
  return Status(ErrorCode::Invalid, "unknown transport");
}

std::shared_ptr<Link> Transport::connect(const ChannelAddr &addr) {
  switch (addr.kind) {
  case TransportKind::Inproc:
    return std::make_shared<InprocLink>(addr);
  case TransportKind::Unix: {
    auto link = std::make_shared<SocketLink<UnixSocket>>(ioContext, addr, opts);
    link->start();
    return link;
  }
  case TransportKind::Tcp: {
    auto link = std::make_shared<SocketLink<Tcp>>(ioContext, addr, opts);
    link->start();
    return link;
  }
  }
  return nullptr;
}

} // namespace monarch::transport
