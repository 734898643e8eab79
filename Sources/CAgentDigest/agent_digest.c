#include "CAgentDigest.h"

#include <openssl/evp.h>
#include <pthread.h>
#include <stdlib.h>

// The algorithms, fetched once: EVP_sha1()/EVP_sha256() would fetch them from the provider
// again on every EVP_DigestInit_ex.
static EVP_MD *sha1_md;
static EVP_MD *sha256_md;
static pthread_once_t fetch_once = PTHREAD_ONCE_INIT;

static void fetch_algorithms(void) {
    sha1_md = EVP_MD_fetch(NULL, "SHA1", NULL);
    sha256_md = EVP_MD_fetch(NULL, "SHA256", NULL);
}

static const EVP_MD *algorithm(int kind) {
    pthread_once(&fetch_once, fetch_algorithms);
    switch (kind) {
    case AGENT_DIGEST_SHA1: return sha1_md;
    case AGENT_DIGEST_SHA256: return sha256_md;
    default: return NULL;
    }
}

struct agent_digest {
    EVP_MD_CTX *context;
    const EVP_MD *md;
};

void agent_digest_free(agent_digest *digest) {
    if (digest == NULL) return;
    EVP_MD_CTX_free(digest->context);
    free(digest);
}

static agent_digest *allocate(const EVP_MD *md) {
    agent_digest *digest = calloc(1, sizeof *digest);
    if (digest == NULL) return NULL;
    digest->md = md;
    digest->context = EVP_MD_CTX_new();
    if (digest->context == NULL) {
        free(digest);
        return NULL;
    }
    return digest;
}

agent_digest *agent_digest_new(int kind) {
    const EVP_MD *md = algorithm(kind);
    if (md == NULL) return NULL;
    agent_digest *digest = allocate(md);
    if (digest == NULL) return NULL;
    if (EVP_DigestInit_ex(digest->context, md, NULL) != 1) {
        agent_digest_free(digest);
        return NULL;
    }
    return digest;
}

agent_digest *agent_digest_copy(const agent_digest *digest) {
    agent_digest *copy = allocate(digest->md);
    if (copy == NULL) return NULL;
    if (EVP_MD_CTX_copy_ex(copy->context, digest->context) != 1) {
        agent_digest_free(copy);
        return NULL;
    }
    return copy;
}

int agent_digest_update(agent_digest *digest, const void *data, size_t length) {
    if (length == 0) return 1;
    return EVP_DigestUpdate(digest->context, data, length) == 1;
}

int agent_digest_final(agent_digest *digest, uint8_t *out) {
    unsigned int length = 0;
    if (EVP_DigestFinal_ex(digest->context, out, &length) != 1) return 0;
    if (EVP_DigestInit_ex(digest->context, digest->md, NULL) != 1) return 0;
    return (int)length;
}

int agent_digest_once(int kind, const void *data, size_t length, uint8_t *out) {
    const EVP_MD *md = algorithm(kind);
    if (md == NULL) return 0;
    unsigned int size = 0;
    if (EVP_Digest(data, length, out, &size, md, NULL) != 1) return 0;
    return (int)size;
}
