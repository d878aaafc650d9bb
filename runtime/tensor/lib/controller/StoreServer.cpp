#include "monarch/tensor/PortStore.h"

#include "monarch/runtime/proc/Runtime.h"
#include "monarch/runtime/util/Log.h"

namespace monarch::tensor {

namespace {
const proto::Value *field(const proto::Value &v, const std::string &name) {
  if (v.kind_case() != proto::Value::kMap)
    return nullptr;
  auto it = v.map().entries().find(name);
  return it == v.map().entries().end() ? nullptr : &it->second;
}

proto::Value reply(const std::string &value) {
  proto::Value v;
  v.set_bytes_value(value);
  return v;
}
} // namespace

StoreServer::StoreServer(Runtime &rt) {
  port = std::make_unique<Port>(
      rt, [this](proto::Value &&v, PayloadList &&) { handle(std::move(v)); });
}

// On the io thread: never blocks (sendToPort only queues).
void StoreServer::handle(proto::Value &&request) {
  const proto::Value *op = field(request, "op");
  const proto::Value *key = field(request, "key");
  if (!op || !key) {
    log::error("rendezvous store: malformed request");
    return;
  }
  const std::string &k = key->string_value();
  std::vector<proto::PortRef> toAnswer;
  std::string value;
  {
    std::lock_guard<std::mutex> guard(mu);
    if (op->string_value() == "set") {
      const proto::Value *v = field(request, "value");
      if (!v)
        return;
      value = v->bytes_value();
      values[k] = value;
      auto it = waiting.find(k);
      if (it != waiting.end()) {
        toAnswer = std::move(it->second);
        waiting.erase(it);
      }
    } else if (op->string_value() == "get") {
      const proto::Value *addr = field(request, "reply_addr");
      const proto::Value *portNo = field(request, "reply_port");
      if (!addr || !portNo)
        return;
      proto::PortRef ref;
      ref.set_addr(addr->string_value());
      ref.set_port(static_cast<uint64_t>(portNo->int_value()));
      auto it = values.find(k);
      if (it == values.end()) {
        waiting[k].push_back(ref);
        return;
      }
      value = it->second;
      toAnswer.push_back(ref);
    }
  }
  for (const auto &ref : toAnswer)
    if (Status s = sendToPort(ref, reply(value)); !s.isOk())
      log::warning("rendezvous store: cannot answer ", ref.addr(), ": ",
                   s.message());
}

} // namespace monarch::tensor
