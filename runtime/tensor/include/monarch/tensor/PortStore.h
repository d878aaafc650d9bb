//===- PortStore.h - A rendezvous store served by the controller -*- C++
//-*-===//
//
// Gloo (and NCCL) ranks exchange connection addresses through a key/value
// Store. On one host a directory does (FileStore); across hosts the
// controller serves the keys itself, over the runtime's authenticated
// connections, so no shared filesystem is needed:
//
//   StoreServer server(rt);                     // controller
//   config.set_store_addr(server.ref().addr()); // ... handed to the workers
//   PortStore store(ref);                       // worker: a tensor::Store
//
// A get for a key not set yet waits (bounded) until some rank sets it.
//
//===----------------------------------------------------------------------===//
#ifndef MONARCH_TENSOR_PORTSTORE_H
#define MONARCH_TENSOR_PORTSTORE_H

#include "monarch/runtime/proc/Port.h"
#include "monarch/tensor/Collectives.h"

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace monarch::tensor {

/// The controller's side: holds the keys, answers gets (now or once set).
class StoreServer {
public:
  explicit StoreServer(Runtime &rt);
  proto::PortRef ref() const { return port->ref(); }

private:
  void handle(proto::Value &&request);
  std::mutex mu;
  std::map<std::string, std::string> values;
  std::map<std::string, std::vector<proto::PortRef>> waiting;
  std::unique_ptr<Port> port;
};

/// A worker's side: set and get through the controller's StoreServer.
class PortStore : public Store {
public:
  explicit PortStore(proto::PortRef server) : server(std::move(server)) {}
  Status set(const std::string &key, const std::vector<char> &value) override;
  Expected<std::vector<char>> get(const std::string &key,
                                  std::chrono::milliseconds timeout) override;

private:
  proto::PortRef server;
};

} // namespace monarch::tensor

#endif // MONARCH_TENSOR_PORTSTORE_H
