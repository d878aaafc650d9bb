#include "monarch/tensor/PortStore.h"

#include "monarch/runtime/proc/Runtime.h"

#include <condition_variable>
#include <optional>

namespace monarch::tensor {

namespace {
proto::Value request(const std::string &op, const std::string &key) {
  proto::Value v;
  auto &entries = *v.mutable_map()->mutable_entries();
  entries["op"].set_string_value(op);
  entries["key"].set_string_value(key);
  return v;
}
} // namespace

Status PortStore::set(const std::string &key, const std::vector<char> &value) {
  proto::Value v = request("set", key);
  (*v.mutable_map()->mutable_entries())["value"].set_bytes_value(
      std::string(value.begin(), value.end()));
  return sendToPort(server, std::move(v));
}

Expected<std::vector<char>> PortStore::get(const std::string &key,
                                           std::chrono::milliseconds timeout) {
  struct Answer {
    std::mutex mu;
    std::condition_variable cv;
    std::optional<std::string> value;
  };
  auto answer = std::make_shared<Answer>();
  Port replies(Runtime::ofProcess(),
               [answer](proto::Value &&v, PayloadList &&) {
                 std::lock_guard<std::mutex> guard(answer->mu);
                 answer->value = v.bytes_value();
                 answer->cv.notify_all();
               });
  proto::Value v = request("get", key);
  proto::PortRef ref = replies.ref();
  auto &entries = *v.mutable_map()->mutable_entries();
  entries["reply_addr"].set_string_value(ref.addr());
  entries["reply_port"].set_int_value(static_cast<int64_t>(ref.port()));
  if (Status s = sendToPort(server, std::move(v)); !s.isOk())
    return s;
  std::unique_lock<std::mutex> lock(answer->mu);
  if (!answer->cv.wait_for(lock, timeout,
                           [&] { return answer->value.has_value(); }))
    return Status(ErrorCode::Timeout,
                  "rendezvous store: key " + key + " not set within " +
                      std::to_string(timeout.count()) + " ms");
  return std::vector<char>(answer->value->begin(), answer->value->end());
}

} // namespace monarch::tensor
