// CCrypto: OpenSSL's libcrypto (Debian's libssl-dev, which libcurl4-openssl-dev already depends on), for the
// webhook sink's HMAC-SHA256 signature and the HTTP API's tokens (random bytes, SHA-256).
#ifndef CCRYPTO_SHIM_H
#define CCRYPTO_SHIM_H

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <stddef.h>

// HMAC-SHA256 of `data` under `key` into `out` (32 bytes); 1 on success.
static inline int CCrypto_hmacSHA256(const void *key, size_t keyLength, const void *data, size_t length,
                                     unsigned char out[32]) {
    unsigned int n = 0;
    if (keyLength > 0x7fffffff) return 0;
    return HMAC(EVP_sha256(), key, (int)keyLength, (const unsigned char *)data, length, out, &n) != NULL && n == 32;
}

// SHA-256 of `data` into `out` (32 bytes); 1 on success.
static inline int CCrypto_sha256(const void *data, size_t length, unsigned char out[32]) {
    unsigned int n = 0;
    return EVP_Digest(data, length, out, &n, EVP_sha256(), NULL) == 1 && n == 32;
}

// `length` bytes from OpenSSL's CSPRNG into `out`; 1 on success.
static inline int CCrypto_random(unsigned char *out, size_t length) {
    if (length > 0x7fffffff) return 0;
    return RAND_bytes(out, (int)length) == 1;
}

#endif
