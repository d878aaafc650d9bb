//===- Auth.h - Job secret and challenge-response MACs ----------*- C++ -*-===//
//
// Each job has a random secret, made by the controller and handed to children
// through their bootstrap pipe. A connection is accepted only after the client
// returns HMAC-SHA256(secret, "monarch-client" || server nonce); the server
// then proves itself the same way over the client's nonce, so neither side
// talks to an impostor.
//
//===----------------------------------------------------------------------===//
#ifndef MONARCH_RUNTIME_TRANSPORT_AUTH_H
#define MONARCH_RUNTIME_TRANSPORT_AUTH_H

#include <string>

namespace monarch::transport {

constexpr size_t kNonceBytes = 32;
constexpr size_t kSecretBytes = 32;

/// Cryptographically random bytes (OpenSSL RAND_bytes).
std::string randomBytes(size_t n);

/// HMAC-SHA256(secret, label || nonce).
std::string handshakeMac(const std::string &secret, const std::string &label,
                         const std::string &nonce);

/// Constant-time comparison.
bool macEquals(const std::string &a, const std::string &b);

inline const char *kClientLabel = "monarch-client-v1";
inline const char *kServerLabel = "monarch-server-v1";

} // namespace monarch::transport

#endif // MONARCH_RUNTIME_TRANSPORT_AUTH_H
