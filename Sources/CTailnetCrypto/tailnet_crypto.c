#include "CTailnetCrypto.h"

#include <sodium.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <pthread.h>
#include <string.h>

static int sodium_ready = -1;
static pthread_once_t sodium_once = PTHREAD_ONCE_INIT;
static EVP_MD *blake2s_md;
static EVP_MAC *blake2s_mac;

static void tc_init_once(void) {
    sodium_ready = sodium_init() < 0 ? -1 : 0;
    // Fetched once and kept: EVP_MD_fetch per call costs a lock and a lookup.
    blake2s_md = EVP_MD_fetch(NULL, "BLAKE2S-256", NULL);
    blake2s_mac = EVP_MAC_fetch(NULL, "BLAKE2SMAC", NULL);
    if (blake2s_md == NULL || blake2s_mac == NULL) sodium_ready = -1;
}

int tc_init(void) {
    pthread_once(&sodium_once, tc_init_once);
    return sodium_ready;
}

void tc_random(uint8_t *out, size_t n) {
    tc_init();
    randombytes_buf(out, n);
}

void tc_zero(void *p, size_t n) { sodium_memzero(p, n); }

int tc_x25519_public(uint8_t pub[32], const uint8_t priv[32]) {
    if (tc_init() != 0) return -1;
    return crypto_scalarmult_curve25519_base(pub, priv) == 0 ? 0 : -1;
}

int tc_x25519(uint8_t shared[32], const uint8_t priv[32], const uint8_t pub[32]) {
    if (tc_init() != 0) return -1;
    return crypto_scalarmult_curve25519(shared, priv, pub) == 0 ? 0 : -1;
}

int tc_chacha_seal(uint8_t *out, const uint8_t *plain, size_t plain_len, const uint8_t *ad, size_t ad_len,
                   const uint8_t nonce[12], const uint8_t key[32]) {
    unsigned long long n = 0;
    return crypto_aead_chacha20poly1305_ietf_encrypt(out, &n, plain, plain_len, ad, ad_len, NULL, nonce, key) == 0 ? 0 : -1;
}

int tc_chacha_open(uint8_t *out, const uint8_t *cipher, size_t cipher_len, const uint8_t *ad, size_t ad_len,
                   const uint8_t nonce[12], const uint8_t key[32]) {
    unsigned long long n = 0;
    if (cipher_len < 16) return -1;
    return crypto_aead_chacha20poly1305_ietf_decrypt(out, &n, NULL, cipher, cipher_len, ad, ad_len, nonce, key) == 0 ? 0 : -1;
}

int tc_xchacha_seal(uint8_t *out, const uint8_t *plain, size_t plain_len, const uint8_t *ad, size_t ad_len,
                    const uint8_t nonce[24], const uint8_t key[32]) {
    unsigned long long n = 0;
    return crypto_aead_xchacha20poly1305_ietf_encrypt(out, &n, plain, plain_len, ad, ad_len, NULL, nonce, key) == 0 ? 0 : -1;
}

int tc_xchacha_open(uint8_t *out, const uint8_t *cipher, size_t cipher_len, const uint8_t *ad, size_t ad_len,
                    const uint8_t nonce[24], const uint8_t key[32]) {
    unsigned long long n = 0;
    if (cipher_len < 16) return -1;
    return crypto_aead_xchacha20poly1305_ietf_decrypt(out, &n, NULL, cipher, cipher_len, ad, ad_len, nonce, key) == 0 ? 0 : -1;
}

int tc_box_seal(uint8_t *out, const uint8_t *plain, size_t plain_len, const uint8_t nonce[24],
                const uint8_t their_pub[32], const uint8_t my_priv[32]) {
    if (tc_init() != 0) return -1;
    return crypto_box_easy(out, plain, plain_len, nonce, their_pub, my_priv) == 0 ? 0 : -1;
}

int tc_box_open(uint8_t *out, const uint8_t *cipher, size_t cipher_len, const uint8_t nonce[24],
                const uint8_t their_pub[32], const uint8_t my_priv[32]) {
    if (tc_init() != 0) return -1;
    if (cipher_len < crypto_box_MACBYTES) return -1;
    return crypto_box_open_easy(out, cipher, cipher_len, nonce, their_pub, my_priv) == 0 ? 0 : -1;
}

int tc_box_beforenm(uint8_t shared[32], const uint8_t their_pub[32], const uint8_t my_priv[32]) {
    if (tc_init() != 0) return -1;
    return crypto_box_beforenm(shared, their_pub, my_priv) == 0 ? 0 : -1;
}

int tc_box_seal_shared(uint8_t *out, const uint8_t *plain, size_t plain_len, const uint8_t nonce[24], const uint8_t shared[32]) {
    if (tc_init() != 0) return -1;
    return crypto_box_easy_afternm(out, plain, plain_len, nonce, shared) == 0 ? 0 : -1;
}

int tc_box_open_shared(uint8_t *out, const uint8_t *cipher, size_t cipher_len, const uint8_t nonce[24], const uint8_t shared[32]) {
    if (tc_init() != 0) return -1;
    if (cipher_len < crypto_box_MACBYTES) return -1;
    return crypto_box_open_easy_afternm(out, cipher, cipher_len, nonce, shared) == 0 ? 0 : -1;
}

int tc_blake2s256(uint8_t out[32], const uint8_t *a, size_t a_len, const uint8_t *b, size_t b_len,
                  const uint8_t *c, size_t c_len) {
    if (tc_init() != 0) return -1;
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    if (ctx == NULL) return -1;
    int ok = EVP_DigestInit_ex2(ctx, blake2s_md, NULL) == 1
        && (a_len == 0 || EVP_DigestUpdate(ctx, a, a_len) == 1)
        && (b_len == 0 || EVP_DigestUpdate(ctx, b, b_len) == 1)
        && (c_len == 0 || EVP_DigestUpdate(ctx, c, c_len) == 1);
    unsigned int n = 0;
    ok = ok && EVP_DigestFinal_ex(ctx, out, &n) == 1 && n == 32;
    EVP_MD_CTX_free(ctx);
    return ok ? 0 : -1;
}

int tc_blake2s_mac(uint8_t *out, size_t out_len, const uint8_t *key, size_t key_len,
                   const uint8_t *data, size_t data_len) {
    if (tc_init() != 0 || out_len < 1 || out_len > 32 || key_len < 1 || key_len > 32) return -1;
    EVP_MAC_CTX *ctx = EVP_MAC_CTX_new(blake2s_mac);
    if (ctx == NULL) return -1;
    size_t size = out_len;
    OSSL_PARAM params[] = {
        OSSL_PARAM_construct_size_t(OSSL_MAC_PARAM_SIZE, &size),
        OSSL_PARAM_construct_end(),
    };
    size_t n = 0;
    int ok = EVP_MAC_init(ctx, key, key_len, params) == 1
        && (data_len == 0 || EVP_MAC_update(ctx, data, data_len) == 1)
        && EVP_MAC_final(ctx, out, &n, out_len) == 1 && n == out_len;
    EVP_MAC_CTX_free(ctx);
    return ok ? 0 : -1;
}

int tc_hmac_blake2s(uint8_t out[32], const uint8_t *key, size_t key_len,
                    const uint8_t *a, size_t a_len, const uint8_t *b, size_t b_len) {
    if (tc_init() != 0) return -1;
    enum { block = 64 };
    uint8_t k[block];
    memset(k, 0, sizeof k);
    if (key_len > block) {
        if (tc_blake2s256(k, key, key_len, NULL, 0, NULL, 0) != 0) return -1;
    } else if (key_len > 0) {
        memcpy(k, key, key_len);
    }
    uint8_t pad[block];
    for (int i = 0; i < block; i++) pad[i] = k[i] ^ 0x36;
    uint8_t inner[32];
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    if (ctx == NULL) return -1;
    unsigned int n = 0;
    int ok = EVP_DigestInit_ex2(ctx, blake2s_md, NULL) == 1 && EVP_DigestUpdate(ctx, pad, block) == 1
        && (a_len == 0 || EVP_DigestUpdate(ctx, a, a_len) == 1)
        && (b_len == 0 || EVP_DigestUpdate(ctx, b, b_len) == 1)
        && EVP_DigestFinal_ex(ctx, inner, &n) == 1;
    for (int i = 0; i < block; i++) pad[i] = k[i] ^ 0x5c;
    ok = ok && EVP_DigestInit_ex2(ctx, blake2s_md, NULL) == 1 && EVP_DigestUpdate(ctx, pad, block) == 1
        && EVP_DigestUpdate(ctx, inner, 32) == 1 && EVP_DigestFinal_ex(ctx, out, &n) == 1;
    EVP_MD_CTX_free(ctx);
    sodium_memzero(k, sizeof k);
    sodium_memzero(pad, sizeof pad);
    sodium_memzero(inner, sizeof inner);
    return ok ? 0 : -1;
}
