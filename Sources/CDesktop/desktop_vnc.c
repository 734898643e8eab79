#include "CDesktop.h"

#include <rfb/rfbclient.h>
#include <X11/Xlib.h>
#include <zlib.h>
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <linux/tcp.h>  // TCP_NODELAY, TCP_INFO with its byte counters
#include <stddef.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
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
    // The deadline guard (see guard_main): the socket it may shut down, the rule's bounds,
    // and whether a call ran past its deadline.
    int sock;
    int timeout_ms;
    int floor_bytes_per_second;
    _Atomic int timed_out;
    pthread_mutex_t guard_lock;
    pthread_cond_t guard_wake;
    // The call under way (under guard_lock): its number (each call a new one), which byte
    // counters are its progress (0: no call), and when it began (monotonic ms).
    uint64_t call_number;
    int call_flow;
    int64_t call_began_ms;
    int guard_stopping;  // under guard_lock
    int guard_running;   // started, not yet joined
    pthread_t guard;
};

static void quiet(const char *format, ...) { (void)format; }

static int tag;

void desktop_vnc_close(desktop_vnc *vnc);

static void finished_update(rfbClient *client) {
    desktop_vnc *vnc = (desktop_vnc *)vnc_api.ClientGetClientData(client, &tag);
    if (vnc) vnc->updates++;
}

static int64_t monotonic_ms(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000;
}

// libvncclient waits with select(2), which aborts (fortified FD_SET) on a descriptor at or
// above FD_SETSIZE, and the agent may hold thousands. So the agent connects the socket itself
// (blocking: libvncclient then never selects to read or write), runs the handshake steps
// rfbInitClient would, and waits for messages with poll(2). The connect itself waits at most
// `timeout_ms` (a listener whose backlog is full drops the SYN, and the kernel retries for
// minutes); -1 with errno on failure, `*timed_out` set when that was the bound.
static int connect_loopback(const char *host, int port, int timeout_ms, int *timed_out) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) return -1;
    struct sockaddr_in addr;
    memset(&addr, 0, sizeof(addr));
    addr.sin_family = AF_INET;
    addr.sin_port = htons((uint16_t)port);
    int failure = 0;
    if (inet_pton(AF_INET, host, &addr.sin_addr) != 1) {
        failure = EINVAL;
    } else if (connect(fd, (struct sockaddr *)&addr, sizeof(addr)) != 0) {
        failure = errno;
        if (failure == EINPROGRESS) {
            int64_t deadline = monotonic_ms() + timeout_ms;
            struct pollfd p = {.fd = fd, .events = POLLOUT, .revents = 0};
            int rc = 0;
            for (;;) {
                int64_t left = deadline - monotonic_ms();
                if (left <= 0) {
                    rc = 0;
                    break;
                }
                rc = poll(&p, 1, (int)left);
                if (rc >= 0 || errno != EINTR) break;
            }
            int error = 0;
            socklen_t length = sizeof(error);
            if (rc == 0) {
                *timed_out = 1;
                failure = ETIMEDOUT;
            } else if (rc < 0) {
                failure = errno;
            } else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) != 0) {
                failure = errno;
            } else {
                failure = error;
            }
        }
    }
    // Blocking again once connected: libvncclient must never see EAGAIN.
    int flags = failure == 0 ? fcntl(fd, F_GETFL) : -1;
    if (failure == 0 && (flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0)) failure = errno;
    if (failure != 0) {
        close(fd);
        errno = failure;
        return -1;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return fd;
}

// Which byte counters of the socket are a call's progress: bytes received (a read), bytes
// the server acknowledged (a write), or both (the handshake).
enum { FLOW_IN = 1, FLOW_OUT = 2 };

void desktop_vnc_deadline_begin(desktop_vnc_deadline *deadline, int timeout_ms, int floor_bytes_per_second, int64_t now_ms, uint64_t counter) {
    deadline->timeout_ms = timeout_ms > 0 ? timeout_ms : 1;
    deadline->floor_bytes_per_second = floor_bytes_per_second > 0 ? floor_bytes_per_second : 1;
    deadline->began_ms = now_ms;
    deadline->progress_ms = now_ms;
    deadline->counter = counter;
    deadline->moved = 0;
}

// The longest the call may last in all: the ceiling, or the timeout if longer.
static int64_t deadline_ceiling_ms(const desktop_vnc_deadline *deadline) {
    return deadline->timeout_ms > DESKTOP_VNC_CALL_CEILING_MS ? deadline->timeout_ms : DESKTOP_VNC_CALL_CEILING_MS;
}

// What the bytes moved so far have earned at the floor rate (saturating, far past any real
// call), on top of the silence bound.
static uint64_t deadline_earned_ms(const desktop_vnc_deadline *deadline) {
    uint64_t floor = (uint64_t)deadline->floor_bytes_per_second;
    return deadline->moved >= UINT64_MAX / 1000 / 2 ? UINT64_MAX / 1000 / 2 : deadline->moved * 1000 / floor;
}

int desktop_vnc_deadline_passed(desktop_vnc_deadline *deadline, int64_t now_ms, uint64_t counter) {
    // The counters only grow: a smaller value (a failed sample reads 0) is no progress, and
    // is not taken as the new base either.
    if (counter > deadline->counter) {
        deadline->moved += counter - deadline->counter;
        deadline->counter = counter;
        deadline->progress_ms = now_ms;
    }
    if (now_ms - deadline->progress_ms >= deadline->timeout_ms) return 1;
    // Whatever the rate, no call outlasts the ceiling (or the timeout, if longer): a server
    // streaming one endless update must not hold the loop thread and the actions' lock.
    if (now_ms - deadline->began_ms >= deadline_ceiling_ms(deadline)) return 1;
    int64_t elapsed = now_ms - deadline->began_ms;
    return elapsed >= 0 && (uint64_t)elapsed >= (uint64_t)deadline->timeout_ms + deadline_earned_ms(deadline);
}

int64_t desktop_vnc_deadline_left_ms(const desktop_vnc_deadline *deadline, int64_t now_ms) {
    // The first instant each bound of desktop_vnc_deadline_passed holds, the counter as it
    // was last recorded: the silence bound, the ceiling, the floor (saturating).
    int64_t at = deadline->progress_ms + deadline->timeout_ms;
    int64_t ceiling = deadline->began_ms + deadline_ceiling_ms(deadline);
    if (ceiling < at) at = ceiling;
    uint64_t allowed = (uint64_t)deadline->timeout_ms + deadline_earned_ms(deadline);
    if (allowed < (uint64_t)(at - deadline->began_ms)) at = deadline->began_ms + (int64_t)allowed;
    return at > now_ms ? at - now_ms : 0;
}

// The socket's progress counter for `flow`: Linux's totals of bytes received and of bytes
// the peer acknowledged (TCP_INFO, since Linux 4.1), summed as asked. 0 when the kernel
// does not say (the call is then bounded as if nothing moved: `timeout_ms` in all).
static uint64_t socket_progress(int sock, int flow) {
    struct tcp_info info;
    memset(&info, 0, sizeof(info));
    socklen_t length = sizeof(info);
    if (getsockopt(sock, IPPROTO_TCP, TCP_INFO, &info, &length) != 0) return 0;
    uint64_t moved = 0;
    if ((flow & FLOW_IN) && length >= offsetof(struct tcp_info, tcpi_bytes_received) + sizeof(info.tcpi_bytes_received))
        moved += info.tcpi_bytes_received;
    if ((flow & FLOW_OUT) && length >= offsetof(struct tcp_info, tcpi_bytes_acked) + sizeof(info.tcpi_bytes_acked))
        moved += info.tcpi_bytes_acked;
    return moved;
}

// The deadline guard: a thread of the client's own that, while a call is under way (a read
// of one server message, or a write, that libvncclient blocks in; it sleeps while none is),
// samples the socket's byte counters a few times per timeout and applies the rule of
// desktop_vnc_deadline_passed: the call may go `timeout_ms` with no byte moving, and may
// last `timeout_ms` plus what its bytes take at `floor_bytes_per_second`. So a large
// message that keeps arriving is never cut short, while a silent server, or one trickling
// bytes below the floor (one every few seconds), is cut off about `timeout_ms` after the
// call began. Past either bound it marks the client timed out and shuts the socket down, so
// the blocked read sees end of file and a blocked write fails (EPIPE), and every later call
// fails at once. Socket options would not do: past SO_RCVTIMEO or SO_SNDTIMEO libvncclient
// selects (the abort above), and its writes wait for the socket without a bound.
static void *guard_main(void *argument) {
    desktop_vnc *vnc = argument;
    prctl(PR_SET_NAME, "desktop-vnc-ttl", 0, 0, 0);
    int64_t tick = vnc->timeout_ms / 10;
    if (tick < 20) tick = 20;
    if (tick > 500) tick = 500;
    desktop_vnc_deadline deadline;
    uint64_t watching = 0;  // the call `deadline` is for (calls are numbered from 1)
    pthread_mutex_lock(&vnc->guard_lock);
    while (!vnc->guard_stopping) {
        if (vnc->call_flow == 0 || atomic_load(&vnc->timed_out)) {
            // No call under way (or the connection is down already): sleep until one begins
            // (an idle connection costs no wake-ups).
            pthread_cond_wait(&vnc->guard_wake, &vnc->guard_lock);
            continue;
        }
        if (vnc->call_number != watching) {
            watching = vnc->call_number;
            desktop_vnc_deadline_begin(&deadline, vnc->timeout_ms, vnc->floor_bytes_per_second, vnc->call_began_ms,
                socket_progress(vnc->sock, vnc->call_flow));
        }
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_sec += tick / 1000;
        until.tv_nsec += (tick % 1000) * 1000000;
        if (until.tv_nsec >= 1000000000) {
            until.tv_sec += 1;
            until.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&vnc->guard_wake, &vnc->guard_lock, &until);
        if (vnc->guard_stopping || vnc->call_flow == 0 || vnc->call_number != watching) continue;
        if (desktop_vnc_deadline_passed(&deadline, monotonic_ms(), socket_progress(vnc->sock, vnc->call_flow))) {
            atomic_store(&vnc->timed_out, 1);
            shutdown(vnc->sock, SHUT_RDWR);
        }
    }
    pthread_mutex_unlock(&vnc->guard_lock);
    return NULL;
}

static int guard_start(desktop_vnc *vnc) {
    pthread_condattr_t condition;
    if (pthread_condattr_init(&condition) != 0) return -1;
    int rc = pthread_condattr_setclock(&condition, CLOCK_MONOTONIC);
    if (rc == 0) rc = pthread_cond_init(&vnc->guard_wake, &condition);
    pthread_condattr_destroy(&condition);
    if (rc != 0) return -1;
    if (pthread_mutex_init(&vnc->guard_lock, NULL) != 0) {
        pthread_cond_destroy(&vnc->guard_wake);
        return -1;
    }
    pthread_attr_t attributes;
    rc = pthread_attr_init(&attributes);
    if (rc == 0) {
        pthread_attr_setstacksize(&attributes, 64 * 1024);
        rc = pthread_create(&vnc->guard, &attributes, guard_main, vnc);
        pthread_attr_destroy(&attributes);
    }
    if (rc != 0) {
        pthread_mutex_destroy(&vnc->guard_lock);
        pthread_cond_destroy(&vnc->guard_wake);
        return -1;
    }
    vnc->guard_running = 1;
    return 0;
}

static void guard_stop(desktop_vnc *vnc) {
    if (!vnc->guard_running) return;
    pthread_mutex_lock(&vnc->guard_lock);
    vnc->guard_stopping = 1;
    pthread_cond_signal(&vnc->guard_wake);
    pthread_mutex_unlock(&vnc->guard_lock);
    pthread_join(vnc->guard, NULL);
    pthread_mutex_destroy(&vnc->guard_lock);
    pthread_cond_destroy(&vnc->guard_wake);
    vnc->guard_running = 0;
}

// A call that may block on the socket runs between these two (one at a time: the Swift side
// holds its lock, or the client is not shared yet); `flow` says which way its bytes go.
static void call_begins(desktop_vnc *vnc, int flow) {
    if (!vnc->guard_running) return;
    // Under the lock: the guard checks and sleeps under it, so this wake is not lost.
    pthread_mutex_lock(&vnc->guard_lock);
    vnc->call_number++;
    vnc->call_flow = flow;
    vnc->call_began_ms = monotonic_ms();
    pthread_cond_signal(&vnc->guard_wake);
    pthread_mutex_unlock(&vnc->guard_lock);
}

static void call_ends(desktop_vnc *vnc) {
    if (!vnc->guard_running) return;
    pthread_mutex_lock(&vnc->guard_lock);
    vnc->call_flow = 0;
    pthread_mutex_unlock(&vnc->guard_lock);
}

desktop_vnc *desktop_vnc_connect(
    const char *host, int port, int timeout_ms, int floor_bytes_per_second, int *timed_out, char *error, size_t error_size) {
    *timed_out = 0;
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
    vnc->sock = -1;
    vnc->timeout_ms = timeout_ms > 0 ? timeout_ms : 1;
    vnc->floor_bytes_per_second = floor_bytes_per_second > 0 ? floor_bytes_per_second : 1;
    int fd = connect_loopback(host, port, vnc->timeout_ms, timed_out);
    if (fd < 0) {
        snprintf(error, error_size, "dial tcp %s:%d: %s", host, port, strerror(errno));
        free(vnc);
        return NULL;
    }
    vnc->sock = fd;
    if (guard_start(vnc) != 0) {
        snprintf(error, error_size, "cannot start the VNC connection's deadline thread");
        desktop_vnc_close(vnc);
        return NULL;
    }
    rfbClient *client = vnc_api.GetClient(8, 3, 4);
    if (!client) {
        desktop_vnc_close(vnc);
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
    call_begins(vnc, FLOW_IN | FLOW_OUT);
    rfbBool shaken = vnc_api.InitialiseConnection(client);
    call_ends(vnc);
    if (!shaken) {
        *timed_out = atomic_load(&vnc->timed_out);
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
    call_begins(vnc, FLOW_OUT);
    rfbBool ready = client->MallocFrameBuffer(client) && vnc_api.SetFormat(client)
        && vnc_api.SendUpdateRequest(client, 0, 0, client->width, client->height, FALSE);
    call_ends(vnc);
    if (!ready) {
        *timed_out = atomic_load(&vnc->timed_out);
        snprintf(error, error_size, "RFB setup with %s:%d failed", host, port);
        desktop_vnc_close(vnc);
        return NULL;
    }
    return vnc;
}

int desktop_vnc_timed_out(desktop_vnc *vnc) { return atomic_load(&vnc->timed_out); }

int desktop_vnc_wait(desktop_vnc *vnc, int timeout_us) {
    if (vnc->client->buffered > 0) return 1;
    struct pollfd p = {.fd = vnc->client->sock, .events = POLLIN, .revents = 0};
    int rc = poll(&p, 1, timeout_us / 1000);
    if (rc < 0) return errno == EINTR ? 0 : -1;
    if (rc > 0 && !(p.revents & POLLIN)) return -1;  // hang-up or error with nothing to read
    return rc;
}

int desktop_vnc_handle(desktop_vnc *vnc) {
    call_begins(vnc, FLOW_IN);
    rfbBool ok = vnc_api.HandleServerMessage(vnc->client);
    call_ends(vnc);
    return ok ? 0 : -1;
}

int desktop_vnc_pointer(desktop_vnc *vnc, int x, int y, int buttons) {
    call_begins(vnc, FLOW_OUT);
    rfbBool ok = vnc_api.SendPointer(vnc->client, x, y, buttons);
    call_ends(vnc);
    return ok ? 0 : -1;
}

int desktop_vnc_key(desktop_vnc *vnc, uint32_t keysym, int down) {
    call_begins(vnc, FLOW_OUT);
    rfbBool ok = vnc_api.SendKey(vnc->client, keysym, down ? TRUE : FALSE);
    call_ends(vnc);
    return ok ? 0 : -1;
}

int desktop_vnc_request_full(desktop_vnc *vnc) {
    call_begins(vnc, FLOW_OUT);
    rfbBool ok = vnc_api.SendUpdateRequest(vnc->client, 0, 0, vnc->client->width, vnc->client->height, FALSE);
    call_ends(vnc);
    return ok ? 0 : -1;
}

int desktop_vnc_width(const desktop_vnc *vnc) { return vnc->client->width; }
int desktop_vnc_height(const desktop_vnc *vnc) { return vnc->client->height; }
const uint8_t *desktop_vnc_framebuffer(const desktop_vnc *vnc) { return vnc->client->frameBuffer; }
uint64_t desktop_vnc_updates(const desktop_vnc *vnc) { return vnc->updates; }

void desktop_vnc_close(desktop_vnc *vnc) {
    if (!vnc) return;
    // First: the guard may shut the socket down until it is joined, and the socket closes below.
    guard_stop(vnc);
    if (vnc->client) {
        // rfbClientCleanup closes the socket but not the framebuffer libvncclient allocated.
        free(vnc->client->frameBuffer);
        vnc->client->frameBuffer = NULL;
        vnc_api.ClientCleanup(vnc->client);
    } else if (vnc->sock >= 0) {
        close(vnc->sock);
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
