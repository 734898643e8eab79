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
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

struct desktop_vnc {
    rfbClient *client;
    uint64_t updates;
};

static void quiet(const char *format, ...) { (void)format; }

static int tag;

void desktop_vnc_close(desktop_vnc *vnc);

static void finished_update(rfbClient *client) {
    desktop_vnc *vnc = (desktop_vnc *)rfbClientGetClientData(client, &tag);
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
    // libvncclient logs to stderr through these globals; the agent logs for itself.
    rfbClientLog = quiet;
    rfbClientErr = quiet;
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
    rfbClient *client = rfbGetClient(8, 3, 4);
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
    rfbClientSetClientData(client, &tag, vnc);
    vnc->client = client;
    if (!InitialiseRFBConnection(client)) {
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
    if (!client->MallocFrameBuffer(client) || !SetFormatAndEncodings(client)
        || !SendFramebufferUpdateRequest(client, 0, 0, client->width, client->height, FALSE)) {
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

int desktop_vnc_handle(desktop_vnc *vnc) { return HandleRFBServerMessage(vnc->client) ? 0 : -1; }

int desktop_vnc_pointer(desktop_vnc *vnc, int x, int y, int buttons) {
    return SendPointerEvent(vnc->client, x, y, buttons) ? 0 : -1;
}

int desktop_vnc_key(desktop_vnc *vnc, uint32_t keysym, int down) {
    return SendKeyEvent(vnc->client, keysym, down ? TRUE : FALSE) ? 0 : -1;
}

int desktop_vnc_request_full(desktop_vnc *vnc) {
    return SendFramebufferUpdateRequest(vnc->client, 0, 0, vnc->client->width, vnc->client->height, FALSE) ? 0 : -1;
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
        rfbClientCleanup(vnc->client);
    }
    free(vnc);
}

uint32_t desktop_keysym(const char *name) {
    KeySym sym = XStringToKeysym(name);
    return sym == NoSymbol ? 0 : (uint32_t)sym;
}

int desktop_deflate(const uint8_t *input, size_t input_size, uint8_t *output, size_t *output_size, int level) {
    uLongf length = (uLongf)*output_size;
    int rc = compress2(output, &length, input, (uLong)input_size, level);
    *output_size = (size_t)length;
    return rc == Z_OK ? 0 : -1;
}

size_t desktop_deflate_bound(size_t input_size) { return (size_t)compressBound((uLong)input_size); }

uint32_t desktop_crc32(uint32_t crc, const uint8_t *bytes, size_t count) {
    return (uint32_t)crc32((uLong)crc, bytes, (uInt)count);
}
