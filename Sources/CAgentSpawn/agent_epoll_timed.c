#define _GNU_SOURCE
#include "CAgentSpawn.h"

#include <errno.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifndef SYS_epoll_pwait2
#define SYS_epoll_pwait2 441
#endif

/// Set once the kernel refused epoll_pwait2 (before Linux 5.11): later waits round up to ms.
static int pwait2_missing = 0;

int agent_epoll_wait_ns(int epfd, uint64_t *out, int max, long long timeout_ns) {
    struct epoll_event events[64];
    if (max > 64) max = 64;
    int n;
    if (timeout_ns < 0) {
        n = epoll_wait(epfd, events, max, -1);
    } else if (!__atomic_load_n(&pwait2_missing, __ATOMIC_RELAXED)) {
        struct timespec timeout = { .tv_sec = timeout_ns / 1000000000LL, .tv_nsec = timeout_ns % 1000000000LL };
        n = (int)syscall(SYS_epoll_pwait2, epfd, events, max, &timeout, NULL, 0);
        if (n < 0 && errno == ENOSYS) {
            __atomic_store_n(&pwait2_missing, 1, __ATOMIC_RELAXED);
            return agent_epoll_wait_ns(epfd, out, max, timeout_ns);
        }
    } else {
        long long ms = (timeout_ns + 999999LL) / 1000000LL;
        n = epoll_wait(epfd, events, max, ms > 60000 ? 60000 : (int)ms);
    }
    for (int i = 0; i < n; i++) out[i] = events[i].data.u64;
    return n;
}

int agent_epoll_set_readable(int epfd, int fd, uint64_t data, int readable) {
    struct epoll_event event;
    memset(&event, 0, sizeof(event));
    // Off: only EPOLLERR and EPOLLHUP (always reported) wake for it.
    event.events = readable ? EPOLLIN : 0;
    event.data.u64 = data;
    return epoll_ctl(epfd, EPOLL_CTL_MOD, fd, &event);
}
