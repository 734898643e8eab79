#include "CDesktop.h"

#include <rfb/rfbclient.h>
#include <X11/Xlib.h>
#include <zlib.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

struct desktop_vnc {
    rfbClient *client;
    uint64_t updates;
};

static void quiet(const char *format, ...) { (void)format; }

static int tag;

static void finished_update(rfbClient *client) {
    desktop_vnc *vnc = (desktop_vnc *)rfbClientGetClientData(client, &tag);
    if (vnc) vnc->updates++;
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
    rfbClient *client = rfbGetClient(8, 3, 4);
    if (!client) {
        free(vnc);
        snprintf(error, error_size, "out of memory");
        return NULL;
    }
    client->serverHost = strdup(host);
    client->serverPort = port;
    client->appData.shareDesktop = TRUE;
    // Loopback: raw pixels cost the least CPU on both ends.
    client->appData.encodingsString = "copyrect raw";
    client->canHandleNewFBSize = TRUE;
    client->FinishedFrameBufferUpdate = finished_update;
    rfbClientSetClientData(client, &tag, vnc);
    // rfbInitClient frees the client when it fails.
    if (!rfbInitClient(client, NULL, NULL)) {
        free(vnc);
        snprintf(error, error_size, "cannot connect to the VNC server at %s:%d", host, port);
        return NULL;
    }
    vnc->client = client;
    return vnc;
}

int desktop_vnc_wait(desktop_vnc *vnc, int timeout_us) { return WaitForMessage(vnc->client, (unsigned int)timeout_us); }

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
