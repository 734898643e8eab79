// CDesktop: what the desktop module needs from C libraries, behind a small opaque API.
//
// - A VNC client (libvncclient): connect to a loopback RFB server, keep its framebuffer
//   current (32-bit RGBX), send pointer and key events. libvncclient's own structures stay
//   in C; Swift serialises calls (one lock) and runs the message loop on one thread.
// - zlib's deflate and crc32, for PNG encoding.
// - X keysym names (libX11's XStringToKeysym; no display connection is made).
#ifndef CDESKTOP_H
#define CDESKTOP_H

#include <stddef.h>
#include <stdint.h>

typedef struct desktop_vnc desktop_vnc;

/// Connects and completes the RFB handshake (no authentication, shared session) and asks
/// for the whole framebuffer. NULL on failure, with a message in `error`, and `*timed_out`
/// set when the server did not answer in time.
///
/// Bounded by `timeout_ms`: the connect, the handshake, the setup, and from then on each
/// call that reads or writes the socket (desktop_vnc_handle, _pointer, _key, _request_full):
/// one that waits that long fails, and the connection with it (desktop_vnc_timed_out says
/// so). A thread of the client's own keeps the bound until desktop_vnc_close.
desktop_vnc *desktop_vnc_connect(const char *host, int port, int timeout_ms, int *timed_out, char *error, size_t error_size);

/// 1 once a call waited past the client's timeout (its connection is then shut down), else 0.
int desktop_vnc_timed_out(desktop_vnc *vnc);

/// Waits up to `timeout_us` for server data: > 0 data pending, 0 timeout, < 0 error.
/// Touches only the socket; may run while another thread sends events.
int desktop_vnc_wait(desktop_vnc *vnc, int timeout_us);

/// Reads and applies one server message; 0 on success, -1 when the connection failed.
int desktop_vnc_handle(desktop_vnc *vnc);

int desktop_vnc_pointer(desktop_vnc *vnc, int x, int y, int buttons);
int desktop_vnc_key(desktop_vnc *vnc, uint32_t keysym, int down);
/// Asks for a full (non-incremental) update of the whole screen.
int desktop_vnc_request_full(desktop_vnc *vnc);

int desktop_vnc_width(const desktop_vnc *vnc);
int desktop_vnc_height(const desktop_vnc *vnc);
/// The framebuffer: width*height pixels of 4 bytes, R G B X; valid until the next handle.
const uint8_t *desktop_vnc_framebuffer(const desktop_vnc *vnc);
/// Framebuffer updates completed so far (each one a FramebufferUpdate message).
uint64_t desktop_vnc_updates(const desktop_vnc *vnc);

void desktop_vnc_close(desktop_vnc *vnc);

/// The keysym for an X keysym name ("Return", "semicolon", "XF86AudioPlay"), or 0.
uint32_t desktop_keysym(const char *name);

/// A zlib stream compressed piece by piece, its output collected in one buffer that grows
/// as needed (from 64 KiB, doubling) up to `limit` bytes: a stream whose output would pass
/// it fails. Not thread-safe; one owner.
typedef struct desktop_deflater desktop_deflater;

/// A new stream at `level` (NULL without memory).
desktop_deflater *desktop_deflater_begin(int level, size_t limit);
/// Compresses `size` more bytes; 0 on success, -1 once the stream failed (it stays failed).
int desktop_deflater_add(desktop_deflater *deflater, const uint8_t *input, size_t size);
/// Ends the stream; `output` and `size` then hold the zlib stream (owned by the deflater,
/// valid until it is freed). 0 on success.
int desktop_deflater_finish(desktop_deflater *deflater, const uint8_t **output, size_t *size);
void desktop_deflater_free(desktop_deflater *deflater);
/// The most zlib's output can be for `input_size` bytes of input.
size_t desktop_deflate_bound(size_t input_size);
uint32_t desktop_crc32(uint32_t crc, const uint8_t *bytes, size_t count);

#endif
