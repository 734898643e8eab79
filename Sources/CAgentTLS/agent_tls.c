#include "CAgentTLS.h"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// The longest ALPN list kept for a server's choice (wire format).
#define ALPN_CAPACITY 64
// A failure's message: OpenSSL's reasons and the verification result.
#define ERROR_CAPACITY 320
// The largest PEM input taken (a system's whole trust store is about 200 KiB).
#define PEM_CAPACITY (64u << 20)

struct agent_tls_context {
    SSL_CTX *ctx;
    unsigned char alpn[ALPN_CAPACITY];
    unsigned int alpn_length;
};

struct agent_tls_session {
    SSL *ssl;
    BIO *input;  // the peer's ciphertext, fed by the caller (owned by ssl)
    BIO *output; // ciphertext for the peer, taken by the caller (owned by ssl)
    int closed;  // close_notify queued
    char error[ERROR_CAPACITY];
};

// The reasons on OpenSSL's error queue for this thread, joined, then the queue cleared.
static void queue_reasons(char *out, size_t capacity) {
    size_t used = 0;
    out[0] = 0;
    unsigned long code;
    while ((code = ERR_get_error()) != 0) {
        if (used + 2 >= capacity) continue;
        if (used > 0) { out[used++] = ';'; out[used++] = ' '; out[used] = 0; }
        const char *reason = ERR_reason_error_string(code);
        if (reason != NULL) snprintf(out + used, capacity - used, "%s", reason);
        else ERR_error_string_n(code, out + used, capacity - used);
        used = strlen(out);
    }
}

static void context_error(char *error, size_t capacity, const char *what) {
    if (error == NULL || capacity == 0) { ERR_clear_error(); return; }
    char reasons[ERROR_CAPACITY];
    queue_reasons(reasons, sizeof reasons);
    snprintf(error, capacity, "%s%s%s", what, reasons[0] ? ": " : "", reasons);
}

// A session's failure: the queue's reasons, and why the peer's chain was refused if it was.
static void session_error(agent_tls_session *session, int code) {
    char reasons[ERROR_CAPACITY];
    queue_reasons(reasons, sizeof reasons);
    long verify = SSL_get_verify_result(session->ssl);
    const char *kind = code == SSL_ERROR_SYSCALL ? "I/O failure" : "protocol failure";
    if (verify != X509_V_OK)
        snprintf(session->error, sizeof session->error, "%s (%s)", reasons[0] ? reasons : kind,
                 X509_verify_cert_error_string(verify));
    else snprintf(session->error, sizeof session->error, "%s", reasons[0] ? reasons : kind);
}

static SSL_CTX *new_context(const SSL_METHOD *method) {
    SSL_CTX *ctx = SSL_CTX_new(method);
    if (ctx == NULL) return NULL;
    // TLS 1.2 or later, as Go's client asks by default; no renegotiation (Go refuses it);
    // idle connections give their buffers back.
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION);
    SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
    return ctx;
}

static int valid_alpn(const uint8_t *alpn, size_t length) {
    if (length == 0 || length > ALPN_CAPACITY) return 0;
    size_t at = 0;
    while (at < length) {
        if (alpn[at] == 0 || at + 1 + alpn[at] > length) return 0;
        at += 1 + alpn[at];
    }
    return 1;
}

agent_tls_context *agent_tls_client_context(int verify, const uint8_t *ca_pem, size_t ca_length, const uint8_t *alpn,
                                            size_t alpn_length, char *error, size_t error_capacity) {
    ERR_clear_error();
    if (alpn != NULL && !valid_alpn(alpn, alpn_length)) {
        context_error(error, error_capacity, "invalid application protocol list");
        return NULL;
    }
    if (ca_length > PEM_CAPACITY) {
        context_error(error, error_capacity, "the trust roots are too large");
        return NULL;
    }
    agent_tls_context *context = calloc(1, sizeof *context);
    if (context == NULL) return NULL;
    context->ctx = new_context(TLS_client_method());
    if (context->ctx == NULL) {
        context_error(error, error_capacity, "cannot make a TLS context");
        free(context);
        return NULL;
    }
    SSL_CTX_set_verify(context->ctx, verify ? SSL_VERIFY_PEER : SSL_VERIFY_NONE, NULL);
    if (ca_pem != NULL) {
        X509_STORE *store = SSL_CTX_get_cert_store(context->ctx);
        BIO *bio = BIO_new_mem_buf(ca_pem, (int)ca_length);
        int added = 0;
        X509 *certificate;
        while (bio != NULL && (certificate = PEM_read_bio_X509(bio, NULL, NULL, NULL)) != NULL) {
            if (X509_STORE_add_cert(store, certificate) == 1) added += 1;
            X509_free(certificate);
        }
        BIO_free(bio);
        ERR_clear_error(); // the end of the PEM data is reported as an error
        if (added == 0) {
            context_error(error, error_capacity, "no certificate in the trust roots");
            agent_tls_context_free(context);
            return NULL;
        }
    } else if (verify && SSL_CTX_set_default_verify_paths(context->ctx) != 1) {
        context_error(error, error_capacity, "cannot load the system's trust store");
        agent_tls_context_free(context);
        return NULL;
    }
    if (alpn != NULL && SSL_CTX_set_alpn_protos(context->ctx, alpn, (unsigned int)alpn_length) != 0) {
        context_error(error, error_capacity, "cannot set the application protocols");
        agent_tls_context_free(context);
        return NULL;
    }
    return context;
}

static int select_alpn(SSL *ssl, const unsigned char **out, unsigned char *out_length, const unsigned char *in,
                       unsigned int in_length, void *argument) {
    (void)ssl;
    agent_tls_context *context = argument;
    unsigned char *chosen;
    if (SSL_select_next_proto(&chosen, out_length, context->alpn, context->alpn_length, in, in_length) !=
        OPENSSL_NPN_NEGOTIATED)
        return SSL_TLSEXT_ERR_NOACK;
    *out = chosen;
    return SSL_TLSEXT_ERR_OK;
}

agent_tls_context *agent_tls_server_context(const uint8_t *chain_pem, size_t chain_length, const uint8_t *key_pem,
                                            size_t key_length, const uint8_t *alpn, size_t alpn_length, char *error,
                                            size_t error_capacity) {
    ERR_clear_error();
    if (alpn != NULL && !valid_alpn(alpn, alpn_length)) {
        context_error(error, error_capacity, "invalid application protocol list");
        return NULL;
    }
    if (chain_length > PEM_CAPACITY || key_length > PEM_CAPACITY) {
        context_error(error, error_capacity, "the certificate or key is too large");
        return NULL;
    }
    agent_tls_context *context = calloc(1, sizeof *context);
    if (context == NULL) return NULL;
    context->ctx = new_context(TLS_server_method());
    if (context->ctx == NULL) {
        context_error(error, error_capacity, "cannot make a TLS context");
        free(context);
        return NULL;
    }
    BIO *bio = BIO_new_mem_buf(chain_pem, (int)chain_length);
    X509 *certificate;
    int count = 0, ok = bio != NULL;
    while (ok && (certificate = PEM_read_bio_X509(bio, NULL, NULL, NULL)) != NULL) {
        ok = count == 0 ? SSL_CTX_use_certificate(context->ctx, certificate) == 1
                        : SSL_CTX_add1_chain_cert(context->ctx, certificate) == 1;
        X509_free(certificate);
        count += 1;
    }
    BIO_free(bio);
    if (ok && count > 0) ERR_clear_error(); // the end of the PEM data
    EVP_PKEY *key = NULL;
    if (ok && count > 0) {
        bio = BIO_new_mem_buf(key_pem, (int)key_length);
        key = bio != NULL ? PEM_read_bio_PrivateKey(bio, NULL, NULL, NULL) : NULL;
        BIO_free(bio);
    }
    if (!ok || count == 0 || key == NULL || SSL_CTX_use_PrivateKey(context->ctx, key) != 1 ||
        SSL_CTX_check_private_key(context->ctx) != 1) {
        EVP_PKEY_free(key);
        context_error(error, error_capacity, "cannot use the certificate and key");
        agent_tls_context_free(context);
        return NULL;
    }
    EVP_PKEY_free(key);
    if (alpn != NULL) {
        memcpy(context->alpn, alpn, alpn_length);
        context->alpn_length = (unsigned int)alpn_length;
        SSL_CTX_set_alpn_select_cb(context->ctx, select_alpn, context);
    }
    return context;
}

void agent_tls_context_free(agent_tls_context *context) {
    if (context == NULL) return;
    SSL_CTX_free(context->ctx);
    free(context);
}

agent_tls_session *agent_tls_session_new(agent_tls_context *context, int server, const char *server_name) {
    ERR_clear_error();
    agent_tls_session *session = calloc(1, sizeof *session);
    if (session == NULL) return NULL;
    session->ssl = SSL_new(context->ctx);
    session->input = BIO_new(BIO_s_mem());
    session->output = BIO_new(BIO_s_mem());
    if (session->ssl == NULL || session->input == NULL || session->output == NULL) {
        BIO_free(session->input);
        BIO_free(session->output);
        SSL_free(session->ssl);
        free(session);
        ERR_clear_error();
        return NULL;
    }
    // An empty input asks for more rather than reporting the end: the caller says when the
    // connection ended.
    BIO_set_mem_eof_return(session->input, -1);
    SSL_set_bio(session->ssl, session->input, session->output);
    if (server) SSL_set_accept_state(session->ssl);
    else {
        SSL_set_connect_state(session->ssl);
        if (server_name != NULL && SSL_set_tlsext_host_name(session->ssl, server_name) != 1) {
            agent_tls_session_free(session);
            ERR_clear_error();
            return NULL;
        }
    }
    return session;
}

void agent_tls_session_free(agent_tls_session *session) {
    if (session == NULL) return;
    SSL_free(session->ssl); // frees both BIOs
    free(session);
}

int agent_tls_feed(agent_tls_session *session, const uint8_t *bytes, size_t length) {
    while (length > 0) {
        int chunk = length > (1u << 30) ? (1 << 30) : (int)length;
        int written = BIO_write(session->input, bytes, chunk);
        if (written <= 0) return 0;
        bytes += written;
        length -= (size_t)written;
    }
    return 1;
}

size_t agent_tls_pending_output(agent_tls_session *session) { return BIO_ctrl_pending(session->output); }

size_t agent_tls_take_output(agent_tls_session *session, uint8_t *out, size_t capacity) {
    size_t taken = 0;
    if (capacity > 0 && BIO_read_ex(session->output, out, capacity, &taken) != 1) return 0;
    return taken;
}

static int step_result(agent_tls_session *session, int result) {
    int code = SSL_get_error(session->ssl, result);
    switch (code) {
    case SSL_ERROR_WANT_READ: return AGENT_TLS_WANT_READ;
    case SSL_ERROR_ZERO_RETURN: return AGENT_TLS_CLOSED;
    default: session_error(session, code); return AGENT_TLS_ERROR;
    }
}

int agent_tls_handshake(agent_tls_session *session) {
    ERR_clear_error();
    int result = SSL_do_handshake(session->ssl);
    if (result == 1) return AGENT_TLS_OK;
    int step = step_result(session, result);
    return step == AGENT_TLS_CLOSED ? AGENT_TLS_ERROR : step;
}

long agent_tls_read(agent_tls_session *session, uint8_t *out, size_t capacity) {
    ERR_clear_error();
    size_t read = 0;
    int result = SSL_read_ex(session->ssl, out, capacity, &read);
    if (result == 1) return (long)read;
    return step_result(session, result);
}

int agent_tls_write(agent_tls_session *session, const uint8_t *bytes, size_t length) {
    ERR_clear_error();
    while (length > 0) {
        size_t written = 0;
        int result = SSL_write_ex(session->ssl, bytes, length, &written);
        if (result != 1) {
            session_error(session, SSL_get_error(session->ssl, result));
            return AGENT_TLS_ERROR;
        }
        bytes += written;
        length -= written;
    }
    return AGENT_TLS_OK;
}

int agent_tls_close(agent_tls_session *session) {
    if (session->closed) return 1;
    if (!SSL_is_init_finished(session->ssl)) return 0;
    ERR_clear_error();
    session->closed = 1;
    int result = SSL_shutdown(session->ssl);
    ERR_clear_error();
    return result >= 0;
}

const uint8_t *agent_tls_alpn(agent_tls_session *session, size_t *length) {
    const unsigned char *protocol = NULL;
    unsigned int count = 0;
    SSL_get0_alpn_selected(session->ssl, &protocol, &count);
    *length = count;
    return count > 0 ? protocol : NULL;
}

static long certificate_names(X509 *certificate, uint8_t *out, size_t capacity) {
    GENERAL_NAMES *names = X509_get_ext_d2i(certificate, NID_subject_alt_name, NULL, NULL);
    size_t needed = 0;
    int count = names != NULL ? sk_GENERAL_NAME_num(names) : 0;
    for (int index = 0; index < count; index++) {
        const GENERAL_NAME *name = sk_GENERAL_NAME_value(names, index);
        const ASN1_STRING *value;
        if (name->type == GEN_DNS) value = name->d.dNSName;
        else if (name->type == GEN_IPADD) value = name->d.iPAddress;
        else continue;
        int length = ASN1_STRING_length(value);
        if (length < 0 || length > 255) continue;
        if (needed + 2 + (size_t)length <= capacity) {
            out[needed] = name->type == GEN_DNS ? AGENT_TLS_NAME_DNS : AGENT_TLS_NAME_IP;
            out[needed + 1] = (uint8_t)length;
            if (length > 0) memcpy(out + needed + 2, ASN1_STRING_get0_data(value), (size_t)length);
        }
        needed += 2 + (size_t)length;
    }
    GENERAL_NAMES_free(names);
    ERR_clear_error();
    return (long)needed;
}

long agent_tls_peer_names(agent_tls_session *session, uint8_t *out, size_t capacity) {
    X509 *certificate = SSL_get0_peer_certificate(session->ssl);
    if (certificate == NULL) return -1;
    return certificate_names(certificate, out, capacity);
}

long agent_tls_pem_names(const uint8_t *pem, size_t pem_length, uint8_t *out, size_t capacity) {
    if (pem_length > PEM_CAPACITY) return -1;
    BIO *bio = BIO_new_mem_buf(pem, (int)pem_length);
    X509 *certificate = bio != NULL ? PEM_read_bio_X509(bio, NULL, NULL, NULL) : NULL;
    BIO_free(bio);
    ERR_clear_error();
    if (certificate == NULL) return -1;
    long needed = certificate_names(certificate, out, capacity);
    X509_free(certificate);
    return needed;
}

void agent_tls_last_error(agent_tls_session *session, char *out, size_t capacity) {
    if (capacity == 0) return;
    snprintf(out, capacity, "%s", session->error);
    session->error[0] = 0;
}
