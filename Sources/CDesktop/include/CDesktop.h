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
/// Bounded: the connect within `timeout_ms`; the handshake, the setup, and from then on each
/// call that reads or writes the socket (desktop_vnc_handle, _pointer, _key, _request_full)
/// by the rule of desktop_vnc_deadline_passed: no byte moving for `timeout_ms`, or the call
/// lasting longer than `timeout_ms` plus what its bytes take at `floor_bytes_per_second`,
/// fails it, and the connection with it (desktop_vnc_timed_out says so). A thread of the
/// client's own keeps the bound until desktop_vnc_close.
desktop_vnc *desktop_vnc_connect(
    const char *host, int port, int timeout_ms, int floor_bytes_per_second, int *timed_out, char *error, size_t error_size);

/// The deadline of one call on the VNC connection, apart from the socket (the guard thread
/// samples the socket's byte counters and the clock into it; the desktop's X reader, Swift's
/// XSocket, gives it the bytes it has read and waits with desktop_vnc_deadline_left_ms). A
/// deadline bounds silence, not the length of a message that keeps arriving: the call may
/// go `timeout_ms` with no byte moving, and may last `timeout_ms` plus
/// `moved / floor_bytes_per_second` in all. So a peer sending nothing is cut off after
/// `timeout_ms`; one sending r bytes a second below the floor at
/// `timeout_ms / (1 - r / floor)` after the call began (a trickle, one byte every 9 s with a
/// 10 s timeout, at 10 s); a message of N bytes arriving at the floor or faster is never cut
/// short, and lasts at most `timeout_ms + N / floor`. No call lasts longer than
/// DESKTOP_VNC_CALL_CEILING_MS (or `timeout_ms`, if longer), whatever its rate: a largest
/// full-screen update (8 MiB) needs 70 KiB/s to arrive inside it.
#define DESKTOP_VNC_CALL_CEILING_MS 120000

typedef struct desktop_vnc_deadline {
    int64_t timeout_ms;
    int64_t floor_bytes_per_second;
    int64_t began_ms;
    /// When bytes last moved (the call's start before any did).
    int64_t progress_ms;
    /// The counter last seen, and the bytes moved since the start.
    uint64_t counter;
    uint64_t moved;
} desktop_vnc_deadline;

/// Starts the deadline of a call that began at `now_ms` (a monotonic clock), the socket's
/// progress counter (bytes moved, only growing) reading `counter`.
void desktop_vnc_deadline_begin(desktop_vnc_deadline *deadline, int timeout_ms, int floor_bytes_per_second, int64_t now_ms, uint64_t counter);

/// Records the counter read at `now_ms` (a larger value is progress; a smaller one is
/// ignored); 1 when the call is past its deadline, else 0.
int desktop_vnc_deadline_passed(desktop_vnc_deadline *deadline, int64_t now_ms, uint64_t counter);

/// How long from `now_ms` until desktop_vnc_deadline_passed says the call is past its
/// deadline if nothing more moves (the counter as last recorded): 0 when it is already, and
/// exactly the first instant it will be otherwise (no earlier, no later). For a caller that
/// waits for its socket itself (the X reader's poll) rather than sampling it.
int64_t desktop_vnc_deadline_left_ms(const desktop_vnc_deadline *deadline, int64_t now_ms);

/// 1 once a call ran past its deadline (its connection is then shut down), else 0.
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
