#include "monarch/runtime/proc/Port.h"

#include "monarch/runtime/proc/Runtime.h"
#include "monarch/runtime/util/Log.h"

namespace monarch {

Port::Port(Runtime &rt, PortHandler handler) : rt(rt) {
  port = rt.router().openPort(
      [handler = std::move(handler)](transport::Message &&m) {
        if (m.envelope.body_case() != proto::Envelope::kPortMessage) {
          log::warning("port message of unexpected kind ",
                       static_cast<int>(m.envelope.body_case()), " dropped");
          return;
        }
        handler(std::move(*m.envelope.mutable_port_message()->mutable_value()),
                std::move(m.payloads));
      });
}

Port::~Port() { rt.router().closePort(port); }

proto::PortRef Port::ref() const {
  proto::PortRef r;
  r.set_addr(rt.addr());
  r.set_port(port);
  return r;
}

Status sendToPort(const proto::PortRef &to, proto::Value value,
                  PayloadList payloads) {
  Runtime &rt = Runtime::ofProcess();
  transport::Message m;
  m.envelope.set_dest_port(to.port());
  m.envelope.set_sender(rt.senderId());
  *m.envelope.mutable_port_message()->mutable_value() = std::move(value);
  m.payloads = std::move(payloads);
  if (to.addr() == rt.addr()) {
    rt.router().deliver(std::move(m));
    return Status::ok();
  }
  // Refused here, as a value, rather than dropped by the link.
  if (Status fits = transport::checkEncodable(m, rt.transport().options().limits);
      !fits.isOk())
    return fits;
  auto link = rt.link(to.addr());
  if (!link.ok())
    return link.status();
  if (Status room = (*link)->waitForRoom(rt.sendTimeout()); !room.isOk())
    return room;
  (*link)->send(std::move(m));
  return Status::ok();
}

} // namespace monarch
