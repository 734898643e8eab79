#ifndef C_AGENT_TLS_H
#define C_AGENT_TLS_H

#include <stddef.h>
#include <stdint.h>

/// TLS from the system's OpenSSL (Debian's libssl), the one TLS implementation the agent
/// uses. A session is sans-IO: ciphertext is fed in and taken out through memory buffers,
/// so the caller (AgentTLS's channel handler) owns every byte that crosses the socket.

/// A configured SSL_CTX, shared by the sessions made from it (OpenSSL makes SSL objects
/// from one SSL_CTX on several threads safely once it is configured).
typedef struct agent_tls_context agent_tls_context;
/// One connection's SSL with its two memory BIOs.
typedef struct agent_tls_session agent_tls_session;

/// What a session's step asks for next.
enum {
    /// Done (the handshake finished, or the bytes were written).
    AGENT_TLS_OK = 1,
    /// More ciphertext from the peer is needed.
    AGENT_TLS_WANT_READ = 0,
    /// A failure: `agent_tls_last_error` says which.
    AGENT_TLS_ERROR = -1,
    /// The peer sent close_notify: nothing more will be read.
    AGENT_TLS_CLOSED = -2,
};

/// Subject alternative name kinds, as their GENERAL_NAME tags.
enum { AGENT_TLS_NAME_DNS = 2, AGENT_TLS_NAME_IP = 7 };

/// A client context: TLS 1.2 or later; `verify` nonzero verifies the peer's chain against
/// the system's store (`ca_pem` NULL) or the PEM certificates in `ca_pem` (their bytes,
/// `ca_length` long); `alpn` is the wire-format protocol list (length-prefixed names) or
/// NULL. NULL on failure, with the reason in `error`.
agent_tls_context *agent_tls_client_context(int verify, const uint8_t *ca_pem, size_t ca_length, const uint8_t *alpn,
                                            size_t alpn_length, char *error, size_t error_capacity);
/// A server context with the PEM chain (leaf first) and key; `alpn` as above: the first of
/// its own protocols, in its order, that the client also offers is chosen. NULL on failure.
agent_tls_context *agent_tls_server_context(const uint8_t *chain_pem, size_t chain_length, const uint8_t *key_pem,
                                            size_t key_length, const uint8_t *alpn, size_t alpn_length, char *error,
                                            size_t error_capacity);
void agent_tls_context_free(agent_tls_context *context);

/// A session on `context`: a client (with SNI `server_name` unless NULL) or a server.
agent_tls_session *agent_tls_session_new(agent_tls_context *context, int server, const char *server_name);
void agent_tls_session_free(agent_tls_session *session);

/// Appends `length` bytes of the peer's ciphertext. Returns 1, or 0 (no memory).
int agent_tls_feed(agent_tls_session *session, const uint8_t *bytes, size_t length);
/// The number of ciphertext bytes waiting to go to the peer.
size_t agent_tls_pending_output(agent_tls_session *session);
/// Moves up to `capacity` of them into `out`; returns how many.
size_t agent_tls_take_output(agent_tls_session *session, uint8_t *out, size_t capacity);

/// Advances the handshake: AGENT_TLS_OK, AGENT_TLS_WANT_READ or AGENT_TLS_ERROR.
int agent_tls_handshake(agent_tls_session *session);
/// Decrypts into `out`: the byte count (> 0), AGENT_TLS_WANT_READ, AGENT_TLS_CLOSED or
/// AGENT_TLS_ERROR.
long agent_tls_read(agent_tls_session *session, uint8_t *out, size_t capacity);
/// Encrypts all `length` bytes into the output: AGENT_TLS_OK or AGENT_TLS_ERROR.
int agent_tls_write(agent_tls_session *session, const uint8_t *bytes, size_t length);
/// Queues close_notify in the output (once). Returns 1, or 0 if it could not.
int agent_tls_close(agent_tls_session *session);

/// The protocol ALPN chose, its length in `*length`; NULL for none.
const uint8_t *agent_tls_alpn(agent_tls_session *session, size_t *length);
/// The peer leaf certificate's DNS and IP subject alternative names, written to `out` as
/// records (a kind byte, a length byte, the name's bytes; longer names are left out).
/// Returns the bytes the records need (more than `capacity`: call again with that much),
/// or -1 when the peer sent no certificate.
long agent_tls_peer_names(agent_tls_session *session, uint8_t *out, size_t capacity);
/// The same for the first certificate in `pem`, or -1 when it holds none.
long agent_tls_pem_names(const uint8_t *pem, size_t pem_length, uint8_t *out, size_t capacity);

/// Why the last failing call on this thread failed (OpenSSL's error queue, and the chain's
/// verification result when that was the cause), cleared afterwards.
void agent_tls_last_error(agent_tls_session *session, char *out, size_t capacity);

#endif
