#ifndef C_AGENT_DIGEST_H
#define C_AGENT_DIGEST_H

#include <stddef.h>
#include <stdint.h>

/// Message digests from OpenSSL's libcrypto (EVP), the one hash implementation the agent
/// uses. `kind` is AGENT_DIGEST_SHA1 or AGENT_DIGEST_SHA256.
enum { AGENT_DIGEST_SHA1 = 1, AGENT_DIGEST_SHA256 = 256 };

/// An incremental digest (an EVP_MD_CTX).
typedef struct agent_digest agent_digest;

/// A new context ready for updates, or NULL (no memory, or an unknown kind).
agent_digest *agent_digest_new(int kind);
/// A copy of `context` in its current state, or NULL.
agent_digest *agent_digest_copy(const agent_digest *context);
/// Adds `length` bytes. Returns 1, or 0 on failure.
int agent_digest_update(agent_digest *context, const void *data, size_t length);
/// Writes the digest to `out` (20 or 32 bytes) and starts the context again, empty.
/// Returns the digest's length, or 0 on failure.
int agent_digest_final(agent_digest *context, uint8_t *out);
void agent_digest_free(agent_digest *context);
/// The digest of `length` bytes in one call. Returns its length, or 0 on failure.
int agent_digest_once(int kind, const void *data, size_t length, uint8_t *out);

#endif
