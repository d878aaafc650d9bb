#include "monarch/runtime/transport/Auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <stdexcept>

namespace monarch::transport {

std::string randomBytes(size_t n) {
  std::string out(n, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char *>(out.data()),
                 static_cast<int>(n)) != 1)
    // Without randomness there is no security; failing loudly is right.
    std::abort();
  return out;
}

std::string handshakeMac(const std::string &secret, const std::string &label,
                         const std::string &nonce) {
  std::string input = label + nonce;
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
       reinterpret_cast<const unsigned char *>(input.data()), input.size(), mac,
       &length);
  return std::string(reinterpret_cast<const char *>(mac), length);
}

bool macEquals(const std::string &a, const std::string &b) {
  return a.size() == b.size() &&
         CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

} // namespace monarch::transport
