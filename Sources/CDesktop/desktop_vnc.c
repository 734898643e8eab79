#include "CDesktop.h"

#include <rfb/rfbclient.h>
#include <X11/Xlib.h>
#include <zlib.h>
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <dlfcn.h>
#include <pthread.h>

// libvncclient and libX11 (with gnutls, sasl, jpeg, xcb and the rest they bring) are
// loaded on the first desktop use, not at the agent's start: most agents never open a
// desktop, and mapping them cost every agent about 3 MiB of resident memory.
static struct {
    int ok;
    char error[256];
    __typeof__(&rfbGetClient) GetClient;
    __typeof__(&rfbClientCleanup) ClientCleanup;
    __typeof__(&rfbClientGetClientData) ClientGetClientData;
    __typeof__(&rfbClientSetClientData) ClientSetClientData;
    __typeof__(&rfbClientLog) ClientLog;
    __typeof__(&rfbClientErr) ClientErr;
    __typeof__(&HandleRFBServerMessage) HandleServerMessage;
    __typeof__(&InitialiseRFBConnection) InitialiseConnection;
    __typeof__(&SendFramebufferUpdateRequest) SendUpdateRequest;
    __typeof__(&SendKeyEvent) SendKey;
    __typeof__(&SendPointerEvent) SendPointer;
    __typeof__(&SetFormatAndEncodings) SetFormat;
    __typeof__(&XStringToKeysym) StringToKeysym;
} vnc_api;
static pthread_once_t vnc_api_once = PTHREAD_ONCE_INIT;

#define LOAD(handle, field, name) \
    if (!(vnc_api.field = (__typeof__(vnc_api.field))dlsym(handle, name))) { \
        snprintf(vnc_api.error, sizeof(vnc_api.error), "%s: %s missing", #handle, name); \
        return; \
    }

static void vnc_api_load(void) {
    void *vnc = dlopen("libvncclient.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!vnc) {
        snprintf(vnc_api.error, sizeof(vnc_api.error), "cannot load libvncclient: %s", dlerror());
        return;
    }
    void *x11 = dlopen("libX11.so.6", RTLD_NOW | RTLD_LOCAL);
    if (!x11) {
        snprintf(vnc_api.error, sizeof(vnc_api.error), "cannot load libX11: %s", dlerror());
        return;
    }
    LOAD(vnc, GetClient, "rfbGetClient")
    LOAD(vnc, ClientCleanup, "rfbClientCleanup")
    LOAD(vnc, ClientGetClientData, "rfbClientGetClientData")
    LOAD(vnc, ClientSetClientData, "rfbClientSetClientData")
    LOAD(vnc, ClientLog, "rfbClientLog")
    LOAD(vnc, ClientErr, "rfbClientErr")
    LOAD(vnc, HandleServerMessage, "HandleRFBServerMessage")
    LOAD(vnc, InitialiseConnection, "InitialiseRFBConnection")
    LOAD(vnc, SendUpdateRequest, "SendFramebufferUpdateRequest")
    LOAD(vnc, SendKey, "SendKeyEvent")
    LOAD(vnc, SendPointer, "SendPointerEvent")
    LOAD(vnc, SetFormat, "SetFormatAndEncodings")
    LOAD(x11, StringToKeysym, "XStringToKeysym")
    vnc_api.ok = 1;
}

/// Loads the libraries once; NULL when ready, else why not.
static const char *vnc_api_ready(void) {
    pthread_once(&vnc_api_once, vnc_api_load);
    return vnc_api.ok ? NULL : vnc_api.error;
}

struct desktop_vnc {
    rfbClient *client;
    uint64_t updates;
};

static void quiet(const char *format, ...) { (void)format; }

static int tag;

void desktop_vnc_close(desktop_vnc *vnc);

static void finished_update(rfbClient *client) {
    desktop_vnc *vnc = (desktop_vnc *)vnc_api.ClientGetClientData(client, &tag);
    if (vnc) vnc->updates++;
}

// libvncclient waits with select(2), which aborts (fortified FD_SET) on a descriptor at or
// above FD_SETSIZE, and the agent may hold thousands. So the agent connects the socket itself
// (blocking: libvncclient then never selects to read or write), runs the handshake steps
// rfbInitClient would, and waits for messages with poll(2).
static int connect_loopback(const char *host, int port) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    struct sockaddr_in addr;
    memset(&addr, 0, sizeof(addr));
    addr.sin_family = AF_INET;
    addr.sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, host, &addr.sin_addr) != 1 || connect(fd, (struct sockaddr *)&addr, sizeof(addr)) != 0) {
        close(fd);
        return -1;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return fd;
}

desktop_vnc *desktop_vnc_connect(const char *host, int port, char *error, size_t error_size) {
    const char *unavailable = vnc_api_ready();
    if (unavailable) {
        snprintf(error, error_size, "%s", unavailable);
        return NULL;
    }
    // libvncclient logs to stderr through these globals; the agent logs for itself.
    *vnc_api.ClientLog = quiet;
    *vnc_api.ClientErr = quiet;
    desktop_vnc *vnc = calloc(1, sizeof(*vnc));
    if (!vnc) {
        snprintf(error, error_size, "out of memory");
        return NULL;
    }
    int fd = connect_loopback(host, port);
    if (fd < 0) {
        snprintf(error, error_size, "dial tcp %s:%d: %s", host, port, strerror(errno));
        free(vnc);
        return NULL;
    }
    rfbClient *client = vnc_api.GetClient(8, 3, 4);
    if (!client) {
        close(fd);
        free(vnc);
        snprintf(error, error_size, "out of memory");
        return NULL;
    }
    client->sock = fd;
    client->serverHost = strdup(host);
    client->serverPort = port;
    client->appData.shareDesktop = TRUE;
    // Loopback: raw pixels cost the least CPU on both ends.
    client->appData.encodingsString = "copyrect raw";
    client->canHandleNewFBSize = TRUE;
    client->FinishedFrameBufferUpdate = finished_update;
    vnc_api.ClientSetClientData(client, &tag, vnc);
    vnc->client = client;
    if (!vnc_api.InitialiseConnection(client)) {
        snprintf(error, error_size, "RFB handshake with %s:%d failed", host, port);
        desktop_vnc_close(vnc);
        return NULL;
    }
    client->width = client->si.framebufferWidth;
    client->height = client->si.framebufferHeight;
    // Incremental requests after each update cover this rectangle: the whole screen.
    client->updateRect.x = 0;
    client->updateRect.y = 0;
    client->updateRect.w = client->width;
    client->updateRect.h = client->height;
    if (!client->MallocFrameBuffer(client) || !vnc_api.SetFormat(client)
        || !vnc_api.SendUpdateRequest(client, 0, 0, client->width, client->height, FALSE)) {
        snprintf(error, error_size, "RFB setup with %s:%d failed", host, port);
        desktop_vnc_close(vnc);
        return NULL;
    }
    return vnc;
}

int desktop_vnc_wait(desktop_vnc *vnc, int timeout_us) {
    if (vnc->client->buffered > 0) return 1;
    struct pollfd p = {.fd = vnc->client->sock, .events = POLLIN, .revents = 0};
    int rc = poll(&p, 1, timeout_us / 1000);
    if (rc < 0) return errno == EINTR ? 0 : -1;
    if (rc > 0 && !(p.revents & POLLIN)) return -1;  // hang-up or error with nothing to read
    return rc;
}

int desktop_vnc_handle(desktop_vnc *vnc) { return vnc_api.HandleServerMessage(vnc->client) ? 0 : -1; }

int desktop_vnc_pointer(desktop_vnc *vnc, int x, int y, int buttons) {
    return vnc_api.SendPointer(vnc->client, x, y, buttons) ? 0 : -1;
}

int desktop_vnc_key(desktop_vnc *vnc, uint32_t keysym, int down) {
    return vnc_api.SendKey(vnc->client, keysym, down ? TRUE : FALSE) ? 0 : -1;
}

int desktop_vnc_request_full(desktop_vnc *vnc) {
    return vnc_api.SendUpdateRequest(vnc->client, 0, 0, vnc->client->width, vnc->client->height, FALSE) ? 0 : -1;
}

int desktop_vnc_width(const desktop_vnc *vnc) { return vnc->client->width; }
int desktop_vnc_height(const desktop_vnc *vnc) { return vnc->client->height; }
const uint8_t *desktop_vnc_framebuffer(const desktop_vnc *vnc) { return vnc->client->frameBuffer; }
uint64_t desktop_vnc_updates(const desktop_vnc *vnc) { return vnc->updates; }

void desktop_vnc_close(desktop_vnc *vnc) {
    if (!vnc) return;
    if (vnc->client) {
        // rfbClientCleanup closes the socket but not the framebuffer libvncclient allocated.
        free(vnc->client->frameBuffer);
        vnc->client->frameBuffer = NULL;
        vnc_api.ClientCleanup(vnc->client);
    }
    free(vnc);
}

uint32_t desktop_keysym(const char *name) {
    if (vnc_api_ready()) return 0;
    KeySym sym = vnc_api.StringToKeysym(name);
    return sym == NoSymbol ? 0 : (uint32_t)sym;
}

struct desktop_deflater {
    z_stream stream;
    uint8_t *output;
    size_t capacity;
    size_t limit;
    int failed;
};

desktop_deflater *desktop_deflater_begin(int level, size_t limit) {
    desktop_deflater *deflater = calloc(1, sizeof(*deflater));
    if (deflater == NULL) return NULL;
    if (deflateInit(&deflater->stream, level) != Z_OK) {
        free(deflater);
        return NULL;
    }
    deflater->limit = limit;
    return deflater;
}

/// Runs deflate over what the stream holds, growing the output (doubling from 64 KiB, at
/// most to the limit) whenever deflate filled it.
static int deflater_run(desktop_deflater *deflater, int flush) {
    z_stream *stream = &deflater->stream;
    for (;;) {
        if (stream->avail_out == 0) {
            size_t used = deflater->capacity;
            size_t grown = used == 0 ? 64 * 1024 : used * 2;
            if (grown > deflater->limit) grown = deflater->limit;
            if (grown <= used) return -1;
            uint8_t *output = realloc(deflater->output, grown);
            if (output == NULL) return -1;
            deflater->output = output;
            deflater->capacity = grown;
            stream->next_out = output + used;
            stream->avail_out = (uInt)(grown - used);
        }
        int rc = deflate(stream, flush);
        if (rc == Z_STREAM_END) return 0;
        if (rc != Z_OK && rc != Z_BUF_ERROR) return -1;
        // Deflate stops early only when the output is full: with room left, the input is
        // taken (done, without Z_FINISH) or nothing can progress (an error). Each pass
        // grows the output or returns, so the loop ends within the limit.
        if (stream->avail_out > 0) return flush == Z_NO_FLUSH && stream->avail_in == 0 ? 0 : -1;
    }
}

int desktop_deflater_add(desktop_deflater *deflater, const uint8_t *input, size_t size) {
    if (deflater->failed) return -1;
    while (size > 0) {
        uInt piece = size > (1u << 30) ? (1u << 30) : (uInt)size;
        deflater->stream.next_in = (Bytef *)input;
        deflater->stream.avail_in = piece;
        if (deflater_run(deflater, Z_NO_FLUSH) != 0) {
            deflater->failed = 1;
            return -1;
        }
        input += piece;
        size -= piece;
    }
    return 0;
}

int desktop_deflater_finish(desktop_deflater *deflater, const uint8_t **output, size_t *size) {
    if (deflater->failed) return -1;
    deflater->stream.next_in = NULL;
    deflater->stream.avail_in = 0;
    if (deflater_run(deflater, Z_FINISH) != 0) {
        deflater->failed = 1;
        return -1;
    }
    *output = deflater->output;
    *size = deflater->capacity - deflater->stream.avail_out;
    return 0;
}

void desktop_deflater_free(desktop_deflater *deflater) {
    if (deflater == NULL) return;
    deflateEnd(&deflater->stream);
    free(deflater->output);
    free(deflater);
}

size_t desktop_deflate_bound(size_t input_size) { return (size_t)compressBound((uLong)input_size); }

uint32_t desktop_crc32(uint32_t crc, const uint8_t *bytes, size_t count) {
    return (uint32_t)crc32((uLong)crc, bytes, (uInt)count);
}
