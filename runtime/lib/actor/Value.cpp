#include "monarch/runtime/actor/Value.h"

namespace monarch {

const char *valueKindName(const proto::Value &value) {
  switch (value.kind_case()) {
  case proto::Value::kNull:
    return "null";
  case proto::Value::kBoolValue:
    return "bool";
  case proto::Value::kIntValue:
    return "int";
  case proto::Value::kDoubleValue:
    return "double";
  case proto::Value::kStringValue:
    return "string";
  case proto::Value::kBytesValue:
    return "bytes";
  case proto::Value::kList:
    return "list";
  case proto::Value::kMap:
    return "map";
  case proto::Value::kPayload:
    return "blob";
  case proto::Value::KIND_NOT_SET:
    return "nothing";
  }
  return "unknown";
}

void throwKindMismatch(const char *expected, const proto::Value &got) {
  throw DecodeError(std::string("expected ") + expected + ", got " +
                    valueKindName(got));
}

void rebasePayloads(proto::Value &value, uint32_t offset) {
  switch (value.kind_case()) {
  case proto::Value::kPayload:
    value.set_payload(value.payload() + offset);
    break;
  case proto::Value::kList:
    for (auto &item : *value.mutable_list()->mutable_items())
      rebasePayloads(item, offset);
    break;
  case proto::Value::kMap:
    for (auto &entry : *value.mutable_map()->mutable_entries())
      rebasePayloads(entry.second, offset);
    break;
  default:
    break;
  }
}

} // namespace monarch
