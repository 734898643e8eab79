#define _GNU_SOURCE
#include "CAgentSpawn.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

// Writes a decimal integer without stdio (async-signal-safe).
static void write_int(int fd, int value) {
    char buf[16];
    int pos = (int)sizeof(buf);
    unsigned int magnitude = value < 0 ? (unsigned int)(-(long long)value) : (unsigned int)value;
    do {
        buf[--pos] = (char)('0' + magnitude % 10);
        magnitude /= 10;
    } while (magnitude != 0 && pos > 1);
    if (value < 0) buf[--pos] = '-';
    ssize_t ignored = write(fd, buf + pos, sizeof(buf) - (size_t)pos);
    (void)ignored;
}

/// Shared between parent and child: the child runs in the parent's memory (CLONE_VM)
/// while the parent is suspended (CLONE_VFORK), and reports a failure here.
struct spawn_shared {
    const agent_spawn_options *options;
    sigset_t parent_mask;
    volatile int failed_step;
    volatile int child_errno;
};

static int fail(struct spawn_shared *shared, int step) {
    shared->child_errno = errno;
    shared->failed_step = step;
    _exit(127);
    return 127;
}

static int child_main(void *arg) {
    struct spawn_shared *shared = (struct spawn_shared *)arg;
    const agent_spawn_options *o = shared->options;
    // Only async-signal-safe calls from here to exec; nothing that allocates or locks.
    setpgid(0, 0);
    // All signals are blocked (the parent blocked them before clone). Reset every
    // disposition before unblocking, so no parent handler can run in this child.
    struct sigaction dfl;
    memset(&dfl, 0, sizeof(dfl));
    dfl.sa_handler = SIG_DFL;
    for (int sig = 1; sig < NSIG; sig++) {
        if (sig == SIGKILL || sig == SIGSTOP) continue;
        if (sigaction(sig, &dfl, NULL) != 0) {
            // glibc refuses its internal signals (32, 33); an ignored disposition there
            // would still be inherited across exec, so reset it with the raw syscall.
            struct { void *handler; unsigned long flags; void *restorer; unsigned long mask; } ksa = {0};
            ksa.handler = (void *)SIG_DFL;
            syscall(SYS_rt_sigaction, sig, &ksa, NULL, sizeof(ksa.mask));
        }
    }
    int devnull = open("/dev/null", O_RDONLY);
    if (devnull < 0) return fail(shared, AGENT_SPAWN_STEP_STDIN);
    if (devnull != 0) {
        if (dup2(devnull, 0) < 0) return fail(shared, AGENT_SPAWN_STEP_STDIN);
        close(devnull);
    }
    if (dup2(o->output_fd, 1) < 0 || dup2(o->output_fd, 2) < 0) return fail(shared, AGENT_SPAWN_STEP_DUP);
    if (o->cwd != NULL && o->cwd[0] != '\0' && chdir(o->cwd) != 0) return fail(shared, AGENT_SPAWN_STEP_CHDIR);
    if (o->oom_score_adj != AGENT_SPAWN_KEEP) {
        int fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
        if (fd >= 0) {
            write_int(fd, o->oom_score_adj);
            close(fd);
        }
    }
    if (o->nice_value != AGENT_SPAWN_KEEP) setpriority(PRIO_PROCESS, 0, o->nice_value);
    if (o->nofile_soft >= 0) {
        struct rlimit lim;
        if (getrlimit(RLIMIT_NOFILE, &lim) == 0) {
            lim.rlim_cur = (rlim_t)o->nofile_soft;
            setrlimit(RLIMIT_NOFILE, &lim);
        }
    }
    // Whatever another library opened without O_CLOEXEC must not leak into the child:
    // a leaked pipe write end would keep some other process's output open forever.
    syscall(SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC);
    sigset_t empty;
    sigemptyset(&empty);
    sigprocmask(SIG_SETMASK, &empty, NULL);
    execve(o->path, o->argv, o->envp);
    return fail(shared, AGENT_SPAWN_STEP_EXEC);
}

// The child's stack: it only runs child_main and the libc calls above.
#define CHILD_STACK_SIZE (64 * 1024)

pid_t agent_spawn(const agent_spawn_options *o, int *failed_step, int *child_errno) {
    *failed_step = AGENT_SPAWN_STEP_NONE;
    *child_errno = 0;
    // Like glibc's posix_spawn: clone(CLONE_VM | CLONE_VFORK) with a private stack, so no
    // page tables are copied (fork of a large agent costs milliseconds) and the parent
    // resumes only once the child has exec'd or failed.
    void *stack = mmap(NULL, CHILD_STACK_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (stack == MAP_FAILED) {
        *failed_step = AGENT_SPAWN_STEP_FORK;
        *child_errno = errno;
        return -1;
    }
    struct spawn_shared shared;
    memset(&shared, 0, sizeof(shared));
    shared.options = o;
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &shared.parent_mask);
    pid_t pid = clone(child_main, (char *)stack + CHILD_STACK_SIZE, CLONE_VM | CLONE_VFORK | SIGCHLD, &shared);
    int clone_errno = errno;
    pthread_sigmask(SIG_SETMASK, &shared.parent_mask, NULL);
    munmap(stack, CHILD_STACK_SIZE);
    if (pid < 0) {
        *failed_step = AGENT_SPAWN_STEP_FORK;
        *child_errno = clone_errno;
        return -1;
    }
    if (shared.failed_step != AGENT_SPAWN_STEP_NONE) {
        int status;
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
        *failed_step = shared.failed_step;
        *child_errno = shared.child_errno;
        return -1;
    }
    return pid;
}

int agent_pidfd_open(pid_t pid) {
    return (int)syscall(SYS_pidfd_open, pid, 0);
}

int agent_output_pipe(int fds[2], int pipe_size) {
    if (pipe2(fds, O_CLOEXEC) != 0) return -1;
    int flags = fcntl(fds[0], F_GETFL);
    if (flags < 0 || fcntl(fds[0], F_SETFL, flags | O_NONBLOCK) != 0) {
        close(fds[0]);
        close(fds[1]);
        return -1;
    }
    if (pipe_size > 0) fcntl(fds[1], F_SETPIPE_SZ, pipe_size); // best effort
    return 0;
}

int agent_eventfd(void) {
    return eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
}

int agent_epoll_create(void) {
    return epoll_create1(EPOLL_CLOEXEC);
}

int agent_epoll_add(int epfd, int fd, uint64_t data) {
    struct epoll_event event;
    memset(&event, 0, sizeof(event));
    event.events = EPOLLIN;
    event.data.u64 = data;
    return epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &event);
}

int agent_epoll_del(int epfd, int fd) {
    return epoll_ctl(epfd, EPOLL_CTL_DEL, fd, NULL);
}

int agent_epoll_wait(int epfd, uint64_t *out, int max, int timeout_ms) {
    struct epoll_event events[64];
    if (max > 64) max = 64;
    int n = epoll_wait(epfd, events, max, timeout_ms);
    for (int i = 0; i < n; i++) out[i] = events[i].data.u64;
    return n;
}
