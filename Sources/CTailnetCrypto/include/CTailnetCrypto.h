// The tailnet's cryptography from well-kept libraries: libsodium (X25519, ChaCha20-Poly1305,
// XChaCha20-Poly1305, NaCl box = X25519 + XSalsa20-Poly1305, random bytes) and OpenSSL 3's
// libcrypto (BLAKE2s-256 and the keyed BLAKE2s MAC, which libsodium lacks). Every function
// returns 0 on success and -1 on failure (a bad tag, a bad key, an allocation failure).
#ifndef C_TAILNET_CRYPTO_H
#define C_TAILNET_CRYPTO_H

#include <stddef.h>
#include <stdint.h>

/// Initialises libsodium once (idempotent, thread-safe). 0 on success.
int tc_init(void);

/// Fills `out` with `n` bytes from the system CSPRNG.
void tc_random(uint8_t *out, size_t n);

/// Clears `n` bytes in a way the compiler may not remove.
void tc_zero(void *p, size_t n);

/// X25519: a public key from a private key (clamped as RFC 7748 says).
int tc_x25519_public(uint8_t pub[32], const uint8_t priv[32]);
/// X25519: the shared secret; -1 when the result is all zeros (a low-order point).
int tc_x25519(uint8_t shared[32], const uint8_t priv[32], const uint8_t pub[32]);

/// ChaCha20-Poly1305 (RFC 8439, 96-bit nonce). `out` holds `plain_len + 16` bytes.
int tc_chacha_seal(uint8_t *out, const uint8_t *plain, size_t plain_len,
                   const uint8_t *ad, size_t ad_len, const uint8_t nonce[12], const uint8_t key[32]);
/// Opens `cipher_len` bytes (tag last) into `out` (`cipher_len - 16` bytes); -1 on a bad tag.
int tc_chacha_open(uint8_t *out, const uint8_t *cipher, size_t cipher_len,
                   const uint8_t *ad, size_t ad_len, const uint8_t nonce[12], const uint8_t key[32]);

/// XChaCha20-Poly1305 (24-byte nonce): WireGuard's cookie reply.
int tc_xchacha_seal(uint8_t *out, const uint8_t *plain, size_t plain_len,
                    const uint8_t *ad, size_t ad_len, const uint8_t nonce[24], const uint8_t key[32]);
int tc_xchacha_open(uint8_t *out, const uint8_t *cipher, size_t cipher_len,
                    const uint8_t *ad, size_t ad_len, const uint8_t nonce[24], const uint8_t key[32]);

/// NaCl box (X25519 + XSalsa20-Poly1305, the 16-byte tag first, as NaCl's crypto_box_easy and
/// Go's golang.org/x/crypto/nacl/box): DERP's ClientInfo/ServerInfo and disco messages.
int tc_box_seal(uint8_t *out, const uint8_t *plain, size_t plain_len, const uint8_t nonce[24],
                const uint8_t their_pub[32], const uint8_t my_priv[32]);
int tc_box_open(uint8_t *out, const uint8_t *cipher, size_t cipher_len, const uint8_t nonce[24],
                const uint8_t their_pub[32], const uint8_t my_priv[32]);
// The box's precomputed shared key (X25519 + HSalsa20) for a peer, and sealing and opening
// with it: disco computes it once per peer instead of once per message.
int tc_box_beforenm(uint8_t shared[32], const uint8_t their_pub[32], const uint8_t my_priv[32]);
int tc_box_seal_shared(uint8_t *out, const uint8_t *plain, size_t plain_len, const uint8_t nonce[24], const uint8_t shared[32]);
int tc_box_open_shared(uint8_t *out, const uint8_t *cipher, size_t cipher_len, const uint8_t nonce[24], const uint8_t shared[32]);

/// BLAKE2s-256 of the concatenation of up to three parts (a part may be NULL with length 0).
int tc_blake2s256(uint8_t out[32], const uint8_t *a, size_t a_len, const uint8_t *b, size_t b_len,
                  const uint8_t *c, size_t c_len);
/// Keyed BLAKE2s with an `out_len`-byte result (1...32), key 1...32 bytes: WireGuard's MAC
/// (16-byte result) is this.
int tc_blake2s_mac(uint8_t *out, size_t out_len, const uint8_t *key, size_t key_len,
                   const uint8_t *data, size_t data_len);
/// HMAC-BLAKE2s-256 (RFC 2104 with BLAKE2s-256, 64-byte blocks): WireGuard's HMAC and KDF.
int tc_hmac_blake2s(uint8_t out[32], const uint8_t *key, size_t key_len,
                    const uint8_t *a, size_t a_len, const uint8_t *b, size_t b_len);

#endif
