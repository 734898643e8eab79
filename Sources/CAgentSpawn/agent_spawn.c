#define _GNU_SOURCE
#include "CAgentSpawn.h"
#include <termios.h>

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <link.h>
#include <elf.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <dirent.h>
#include <malloc.h>
#include <stdlib.h>
#include <stdio.h>
#include <sys/resource.h>
#include <stdatomic.h>
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
    /// The signals the child resets (bit n-1 for signal n): those whose disposition is not
    /// the default (``non_default_signals``).
    unsigned long long reset_signals;
    volatile int failed_step;
    volatile int child_errno;
    pid_t parent_pid;
    /// A descriptor of /dev/null for the child's stdin, or -1 (the child opens one).
    int dev_null;
};

/// /dev/null opened for reading once, when the library loads (close-on-exec; a child's
/// dup2 onto 0 clears that flag on its copy), and its device; -1 if it could not be.
static int dev_null_fd = -1;
static dev_t dev_null_rdev;

__attribute__((constructor)) static void open_dev_null(void) {
    int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd >= 0 && fstat(fd, &st) == 0 && S_ISCHR(st.st_mode)) {
        dev_null_rdev = st.st_rdev;
        dev_null_fd = fd;
    } else if (fd >= 0) {
        close(fd);
    }
}

/// ``dev_null_fd`` if it is still /dev/null (nothing closed it and reused the number), else -1.
static int dev_null_checked(void) {
    struct stat st;
    if (dev_null_fd < 0 || fstat(dev_null_fd, &st) != 0 || !S_ISCHR(st.st_mode) || st.st_rdev != dev_null_rdev) return -1;
    return dev_null_fd;
}

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
    // A new session (no controlling terminal, its own group), only a new group, or (2) the
    // caller's group (a program in the foreground of the caller's terminal).
    if (o->new_session == 1) setsid(); else if (o->new_session == 0) setpgid(0, 0);
    if (o->parent_death_signal > 0) {
        // Linux ties this to the thread that cloned us: the caller keeps that thread alive
        // for as long as the child should live. If it already ended, do not start at all.
        prctl(PR_SET_PDEATHSIG, o->parent_death_signal);
        if (getppid() != shared->parent_pid) _exit(127);
    }
    // All signals are blocked (the parent blocked them before clone). Reset every
    // disposition that is not the default before unblocking, so no parent handler can run
    // in this child and no ignored signal stays ignored in the program.
    struct sigaction dfl;
    memset(&dfl, 0, sizeof(dfl));
    dfl.sa_handler = SIG_DFL;
    for (int sig = 1; sig < NSIG; sig++) {
        if (sig == SIGKILL || sig == SIGSTOP) continue;
        if (sig <= 64 && !(shared->reset_signals & (1ULL << (sig - 1)))) continue;
        if (sigaction(sig, &dfl, NULL) != 0) {
            // glibc refuses its internal signals (32, 33); an ignored disposition there
            // would still be inherited across exec, so reset it with the raw syscall.
            struct { void *handler; unsigned long flags; void *restorer; unsigned long mask; } ksa = {0};
            ksa.handler = (void *)SIG_DFL;
            syscall(SYS_rt_sigaction, sig, &ksa, NULL, sizeof(ksa.mask));
        }
    }
    if (o->input_fd >= 0) {
        if (dup2(o->input_fd, 0) < 0) return fail(shared, AGENT_SPAWN_STEP_STDIN);
    } else if (shared->dev_null >= 0) {
        // The library's own /dev/null: a dup2 where an open walked the path in every child.
        if (dup2(shared->dev_null, 0) < 0) return fail(shared, AGENT_SPAWN_STEP_STDIN);
    } else {
        int devnull = open("/dev/null", O_RDONLY);
        if (devnull < 0) return fail(shared, AGENT_SPAWN_STEP_STDIN);
        if (devnull != 0) {
            if (dup2(devnull, 0) < 0) return fail(shared, AGENT_SPAWN_STEP_STDIN);
            close(devnull);
        }
    }
    if (dup2(o->output_fd, 1) < 0 || dup2(o->error_fd >= 0 ? o->error_fd : o->output_fd, 2) < 0) return fail(shared, AGENT_SPAWN_STEP_DUP);
    // The terminal on fd 0 becomes the new session's controlling terminal (the session
    // leader's first terminal would only if opened without O_NOCTTY, and it was opened so).
    if (o->controlling_terminal && ioctl(0, TIOCSCTTY, 0) != 0) return fail(shared, AGENT_SPAWN_STEP_DUP);
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

// Child stacks are kept for reuse (at most STACK_POOL_SIZE, 256 KiB): unmapping one in a
// multithreaded process costs a TLB shootdown on every CPU running the agent, about 30 us
// per spawn here. A stack is free again once clone returns (the parent resumes only after
// the child has exec'd or exited).
#define STACK_POOL_SIZE 4
static pthread_mutex_t stack_pool_lock = PTHREAD_MUTEX_INITIALIZER;
static void *stack_pool[STACK_POOL_SIZE];
static int stack_pool_count = 0;

static void *take_stack(void) {
    void *stack = NULL;
    pthread_mutex_lock(&stack_pool_lock);
    if (stack_pool_count > 0) stack = stack_pool[--stack_pool_count];
    pthread_mutex_unlock(&stack_pool_lock);
    if (stack) return stack;
    stack = mmap(NULL, CHILD_STACK_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    return stack == MAP_FAILED ? NULL : stack;
}

static void return_stack(void *stack) {
    pthread_mutex_lock(&stack_pool_lock);
    if (stack_pool_count < STACK_POOL_SIZE) {
        stack_pool[stack_pool_count++] = stack;
        stack = NULL;
    }
    pthread_mutex_unlock(&stack_pool_lock);
    if (stack) munmap(stack, CHILD_STACK_SIZE);
}

#ifndef CLONE_PIDFD
#define CLONE_PIDFD 0x00001000
#endif

/// /proc/self/status, opened once when the library loads (so no test ever sees it appear),
/// for ``non_default_signals``; -1 if it could not be.
static int status_fd = -1;

__attribute__((constructor)) static void open_status(void) {
    status_fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
}

/// The signals whose disposition is not SIG_DFL (caught or ignored; bit n-1 for signal n),
/// from the process's SigIgn and SigCgt: one pread (about 7 us) where resetting all 62
/// dispositions in the child costs about 34 us here, with the parent suspended. All ones if
/// the file cannot be read: then every disposition is reset.
static unsigned long long non_default_signals(void) {
    if (status_fd < 0) return ~0ULL;
    char buf[4096];
    ssize_t n = pread(status_fd, buf, sizeof(buf) - 1, 0);
    if (n <= 0) return ~0ULL;
    buf[n] = 0;
    const char *ignored = strstr(buf, "\nSigIgn:");
    const char *caught = strstr(buf, "\nSigCgt:");
    if (!ignored || !caught) return ~0ULL;
    return strtoull(ignored + 8, NULL, 16) | strtoull(caught + 8, NULL, 16);
}

pid_t agent_spawn(const agent_spawn_options *o, int *failed_step, int *child_errno) {
    return agent_spawn_pidfd(o, failed_step, child_errno, NULL);
}

/// Set once clone refused CLONE_PIDFD with EINVAL: every later spawn leaves the flag off.
static atomic_int clone_pidfd_refused = 0;

pid_t agent_spawn_pidfd(const agent_spawn_options *o, int *failed_step, int *child_errno, int *pidfd_out) {
    if (pidfd_out) *pidfd_out = -1;
    *failed_step = AGENT_SPAWN_STEP_NONE;
    *child_errno = 0;
    // Like glibc's posix_spawn: clone(CLONE_VM | CLONE_VFORK) with a private stack, so no
    // page tables are copied (fork of a large agent costs milliseconds) and the parent
    // resumes only once the child has exec'd or failed.
    void *stack = take_stack();
    if (!stack) {
        *failed_step = AGENT_SPAWN_STEP_FORK;
        *child_errno = errno;
        return -1;
    }
    struct spawn_shared shared;
    memset(&shared, 0, sizeof(shared));
    shared.options = o;
    shared.parent_pid = getpid();
    shared.dev_null = o->input_fd >= 0 ? -1 : dev_null_checked();
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &shared.parent_mask);
    // A handler another thread installs after this read stays in the child until its exec
    // resets it (a window of a few instructions after the unblock); the agent installs its
    // handlers at start, before it spawns anything.
    shared.reset_signals = non_default_signals();
    // CLONE_PIDFD: the pidfd comes with the child, one system call fewer than
    // pidfd_open afterwards (kernels before 5.2 ignore the flag and leave it at -1).
    int pidfd = -1;
    int flags = CLONE_VM | CLONE_VFORK | SIGCHLD | (pidfd_out && !atomic_load_explicit(&clone_pidfd_refused, memory_order_relaxed) ? CLONE_PIDFD : 0);
    pid_t pid = clone(child_main, (char *)stack + CHILD_STACK_SIZE, flags, &shared, &pidfd);
    if (pid < 0 && errno == EINVAL && (flags & CLONE_PIDFD)) {
        // A sandboxed kernel (or a seccomp filter) that refuses the flag: without it, the
        // caller falls back to pidfd_open; later spawns no longer ask.
        atomic_store_explicit(&clone_pidfd_refused, 1, memory_order_relaxed);
        pidfd = -1;
        pid = clone(child_main, (char *)stack + CHILD_STACK_SIZE, flags & ~CLONE_PIDFD, &shared, &pidfd);
    }
    int clone_errno = errno;
    pthread_sigmask(SIG_SETMASK, &shared.parent_mask, NULL);
    return_stack(stack);
    if (pid < 0) {
        *failed_step = AGENT_SPAWN_STEP_FORK;
        *child_errno = clone_errno;
        return -1;
    }
    if (shared.failed_step != AGENT_SPAWN_STEP_NONE) {
        int status;
        if (pidfd >= 0) close(pidfd);
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
        *failed_step = shared.failed_step;
        *child_errno = shared.child_errno;
        return -1;
    }
    if (pidfd_out) *pidfd_out = pidfd;
    return pid;
}

int agent_pidfd_open(pid_t pid) {
    return (int)syscall(SYS_pidfd_open, pid, 0);
}

int agent_output_pipe(int fds[2], int pipe_size) {
    if (pipe2(fds, O_CLOEXEC) != 0) return -1;
    // A new pipe's read end has no status flags but its access mode, which F_SETFL ignores:
    // no F_GETFL first (one system call fewer per start).
    if (fcntl(fds[0], F_SETFL, O_NONBLOCK) != 0) {
        close(fds[0]);
        close(fds[1]);
        return -1;
    }
    if (pipe_size > 0) fcntl(fds[1], F_SETPIPE_SZ, pipe_size); // best effort
    return 0;
}

int agent_input_pipe(int fds[2]) {
    if (pipe2(fds, O_CLOEXEC) != 0) return -1;
    if (fcntl(fds[1], F_SETFL, O_NONBLOCK) != 0) {
        close(fds[0]);
        close(fds[1]);
        return -1;
    }
    return 0;
}

int agent_open_pty(int *primary, int *secondary, unsigned short rows, unsigned short cols) {
    int m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC | O_NONBLOCK);
    if (m < 0) return -1;
    char name[128];
    if (grantpt(m) != 0 || unlockpt(m) != 0 || ptsname_r(m, name, sizeof(name)) != 0) {
        int saved = errno;
        close(m);
        errno = saved;
        return -1;
    }
    int s = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (s < 0) {
        int saved = errno;
        close(m);
        errno = saved;
        return -1;
    }
    struct winsize size = { .ws_row = rows, .ws_col = cols, .ws_xpixel = 0, .ws_ypixel = 0 };
    ioctl(m, TIOCSWINSZ, &size);
    *primary = m;
    *secondary = s;
    return 0;
}

int agent_pty_resize(int fd, unsigned short rows, unsigned short cols) {
    struct winsize size = { .ws_row = rows, .ws_col = cols, .ws_xpixel = 0, .ws_ypixel = 0 };
    return ioctl(fd, TIOCSWINSZ, &size);
}

int agent_pty_eof_char(int fd) {
    struct termios t;
    if (tcgetattr(fd, &t) != 0) return 4;
    return t.c_cc[VEOF];
}

int agent_pty_is_canonical(int fd) {
    struct termios t;
    if (tcgetattr(fd, &t) != 0) return -1;
    return (t.c_lflag & ICANON) ? 1 : 0;
}

int agent_pty_number(int fd) {
    unsigned int number = 0;
    if (ioctl(fd, TIOCGPTN, &number) != 0) return -1;
    return (int)number;
}

int agent_pty_set_mode(int fd, int opcode, unsigned int value) {
    struct termios t;
    if (tcgetattr(fd, &t) != 0) return -1;
    // RFC 4254 section 8: control characters, then input, local, output and control flags.
    switch (opcode) {
#define CC(code, index) case code: t.c_cc[index] = (cc_t)value; break;
    CC(1, VINTR) CC(2, VQUIT) CC(3, VERASE) CC(4, VKILL) CC(5, VEOF) CC(6, VEOL) CC(7, VEOL2)
    CC(8, VSTART) CC(9, VSTOP) CC(10, VSUSP) CC(12, VREPRINT) CC(13, VWERASE) CC(14, VLNEXT)
    CC(18, VDISCARD)
#undef CC
#define FLAG(code, field, bit) case code: if (value) t.field |= bit; else t.field &= ~bit; break;
    FLAG(30, c_iflag, IGNPAR) FLAG(31, c_iflag, PARMRK) FLAG(32, c_iflag, INPCK) FLAG(33, c_iflag, ISTRIP)
    FLAG(34, c_iflag, INLCR) FLAG(35, c_iflag, IGNCR) FLAG(36, c_iflag, ICRNL) FLAG(37, c_iflag, IUCLC)
    FLAG(38, c_iflag, IXON) FLAG(39, c_iflag, IXANY) FLAG(40, c_iflag, IXOFF) FLAG(41, c_iflag, IMAXBEL)
    FLAG(42, c_iflag, IUTF8)
    FLAG(50, c_lflag, ISIG) FLAG(51, c_lflag, ICANON) FLAG(52, c_lflag, XCASE) FLAG(53, c_lflag, ECHO)
    FLAG(54, c_lflag, ECHOE) FLAG(55, c_lflag, ECHOK) FLAG(56, c_lflag, ECHONL) FLAG(57, c_lflag, NOFLSH)
    FLAG(58, c_lflag, TOSTOP) FLAG(59, c_lflag, IEXTEN) FLAG(60, c_lflag, ECHOCTL) FLAG(61, c_lflag, ECHOKE)
    FLAG(62, c_lflag, PENDIN)
    FLAG(70, c_oflag, OPOST) FLAG(71, c_oflag, OLCUC) FLAG(72, c_oflag, ONLCR) FLAG(73, c_oflag, OCRNL)
    FLAG(74, c_oflag, ONOCR) FLAG(75, c_oflag, ONLRET)
    FLAG(90, c_cflag, CS7) FLAG(91, c_cflag, CS8) FLAG(92, c_cflag, PARENB) FLAG(93, c_cflag, PARODD)
#undef FLAG
    default: return 0;  // speeds and unknown modes are ignored
    }
    return tcsetattr(fd, TCSANOW, &t);
}

#ifndef MADV_PAGEOUT
#define MADV_PAGEOUT 21
#endif

/* A mapping of a loaded object (the executable `exe`, or a shared library). */
static int is_loaded_object(const char *path, const char *exe) {
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    return strstr(base, ".so") != NULL || strcmp(path, exe) == 0;
}

/* Whether the system has swap space: without it, pageout can only drop clean file pages. */
static int has_swap(void) {
    FILE *info = fopen("/proc/meminfo", "re");
    if (!info) return 1;
    char line[256];
    unsigned long total = 1;
    while (fgets(line, sizeof(line), info)) {
        if (sscanf(line, "SwapTotal: %lu kB", &total) == 1) break;
    }
    fclose(info);
    return total != 0;
}

/* Read-only file mappings of loaded objects that held no anonymous page when smaps was read:
   the only ranges MADV_DONTNEED may touch. Bounded: past the cap, the rest are left alone. */
enum { RELEASE_MAX_CLEAN = 2048 };
struct release_state {
    unsigned long clean_start[RELEASE_MAX_CLEAN];
    unsigned long clean_end[RELEASE_MAX_CLEAN];
    int clean_count;
    unsigned long page;
};

/* Drops this process's mapping of [start, end) where it lies inside a recorded clean range. */
static void release_clean_part(const struct release_state *state, unsigned long start, unsigned long end) {
    for (int i = 0; i < state->clean_count; i++) {
        unsigned long from = start > state->clean_start[i] ? start : state->clean_start[i];
        unsigned long to = end < state->clean_end[i] ? end : state->clean_end[i];
        if (from < to) (void)madvise((void *)from, to - from, MADV_DONTNEED);
    }
}

/* Whether an object's code is relocated in place (DT_TEXTREL): its read-only segments are
   then written while it loads, so none of them is ever dropped. */
static int has_text_relocations(const struct dl_phdr_info *info) {
    for (int i = 0; i < info->dlpi_phnum; i++) {
        if (info->dlpi_phdr[i].p_type != PT_DYNAMIC) continue;
        const ElfW(Dyn) *dyn = (const ElfW(Dyn) *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
        for (; dyn->d_tag != DT_NULL; dyn++) {
            if (dyn->d_tag == DT_TEXTREL) return 1;
            if (dyn->d_tag == DT_FLAGS && (dyn->d_un.d_val & DF_TEXTREL)) return 1;
        }
    }
    return 0;
}

/* Called by dl_iterate_phdr, which holds the loader's list lock: no object it lists can be
   unloaded (its pages unmapped and the addresses reused) until this returns, and an object
   is listed only once its segments are mapped. Only segments the object maps without write
   permission are dropped (no page its writable segment shares), and only where smaps found
   no anonymous page: a library being loaded meanwhile writes its relocations to its
   writable segment (RELRO included), never to these. Dropping a range while another
   library was still being mapped over it (its address reservation looks like a clean
   read-only mapping) once threw away relocated data and crashed the agent. */
static int release_object_pages(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    struct release_state *state = data;
    // The program headers are read whole before anything is dropped: they sit in the
    // object's first read-only page, and a read after the drop would fault it back in with
    // its neighbours (fault-around: 64 KiB an object).
    enum { MAX_SEGMENTS = 64 };
    if (info->dlpi_phnum > MAX_SEGMENTS || has_text_relocations(info)) return 0;
    ElfW(Phdr) headers[MAX_SEGMENTS];
    int count = info->dlpi_phnum;
    memcpy(headers, info->dlpi_phdr, sizeof(ElfW(Phdr)) * (size_t)count);
    unsigned long mask = ~(state->page - 1);
    unsigned long drop_start[MAX_SEGMENTS], drop_end[MAX_SEGMENTS];
    int drops = 0;
    for (int i = 0; i < count; i++) {
        const ElfW(Phdr) *segment = &headers[i];
        if (segment->p_type != PT_LOAD || (segment->p_flags & PF_W) || segment->p_memsz == 0) continue;
        unsigned long first = info->dlpi_addr + segment->p_vaddr;
        unsigned long start = first & mask;
        unsigned long end = (first + segment->p_memsz + state->page - 1) & mask;
        // A page the object's writable segment shares is never dropped: it may hold
        // relocated data.
        for (int j = 0; j < count; j++) {
            const ElfW(Phdr) *other = &headers[j];
            if (other->p_type != PT_LOAD || !(other->p_flags & PF_W)) continue;
            unsigned long other_start = (info->dlpi_addr + other->p_vaddr) & mask;
            unsigned long other_end = (info->dlpi_addr + other->p_vaddr + other->p_memsz + state->page - 1) & mask;
            if (other_start <= start && start < other_end) start = other_end;
            if (other_start < end && end <= other_end) end = other_start;
            if (start < other_start && other_end < end) end = start;  // malformed: skip it
        }
        if (start < end) {
            drop_start[drops] = start;
            drop_end[drops] = end;
            drops++;
        }
    }
    // Pages other processes map too (a shared library's text) stay in the page cache: only
    // this process's mapping of them is dropped, so its resident set counts what it touches
    // from here on (a later touch is a minor fault).
    for (int i = 0; i < drops; i++) release_clean_part(state, drop_start[i], drop_end[i]);
    return 0;
}

int agent_release_file_pages(void) {
    // smaps, not maps: a read-only mapping of a file can still hold private anonymous pages
    // (relocated data, RELRO), which pageout would swap out; only clean file pages go.
    // Without swap, the writable mappings of loaded objects are paged out too: their
    // written pages have nowhere to go and stay, the clean ones (data read at start) leave.
    // Pageout only ever reclaims, as memory pressure would, so a mapping that changed
    // since smaps was read loses nothing; the dropping that can lose data is done apart,
    // from the loader's own list (release_object_pages).
    int swap = has_swap();
    char exe[4096];
    ssize_t exe_length = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    exe[exe_length > 0 ? exe_length : 0] = 0;
    struct release_state *state = calloc(1, sizeof(*state));
    if (!state) return -1;
    long page = sysconf(_SC_PAGESIZE);
    state->page = page > 0 ? (unsigned long)page : 4096;
    FILE *maps = fopen("/proc/self/smaps", "re");
    if (!maps) {
        free(state);
        return -1;
    }
    char line[4096];
    int advised = 0;
    unsigned long start = 0, end = 0;
    int candidate = 0, object = 0;
    while (fgets(line, sizeof(line), maps)) {
        unsigned long s, e, offset, inode;
        char perms[5], device[16];
        int consumed = 0;
        if (sscanf(line, "%lx-%lx %4s %lx %15s %lu %n", &s, &e, perms, &offset, device, &inode, &consumed) == 6) {
            // A mapping's header: file-backed (inode != 0), readable, not writable.
            start = s;
            end = e;
            candidate = inode != 0 && perms[0] == 'r' && perms[1] != 'w';
            char *path = line + consumed;
            path[strcspn(path, "\n")] = 0;
            int loaded = inode != 0 && path[0] == '/' && is_loaded_object(path, exe);
            object = candidate && loaded;
            if (!swap && loaded && perms[1] == 'w' && perms[3] == 'p' && madvise((void *)start, end - start, MADV_PAGEOUT) == 0)
                advised++;
            continue;
        }
        unsigned long anonymous;
        if (candidate && sscanf(line, "Anonymous: %lu kB", &anonymous) == 1) {
            if (anonymous == 0) {
                // Pages no other process maps leave memory, as under memory pressure.
                if (madvise((void *)start, end - start, MADV_PAGEOUT) == 0) advised++;
                if (object && state->clean_count < RELEASE_MAX_CLEAN) {
                    state->clean_start[state->clean_count] = start;
                    state->clean_end[state->clean_count] = end;
                    state->clean_count++;
                }
            }
            candidate = 0;
        }
    }
    fclose(maps);
    dl_iterate_phdr(release_object_pages, state);
    free(state);
    return advised;
}

int agent_set_thread_name(const char *name) {
    char truncated[16];
    snprintf(truncated, sizeof(truncated), "%s", name);
    return pthread_setname_np(pthread_self(), truncated);
}

int agent_spawn_actions_close_from(posix_spawn_file_actions_t *actions, int low) {
    return posix_spawn_file_actions_addclosefrom_np(actions, low);
}

int agent_spawn_actions_chdir(posix_spawn_file_actions_t *actions, const char *path) {
    return posix_spawn_file_actions_addchdir_np(actions, path);
}

int agent_pipe_pending(int fd) {
    int pending = 0;
    return ioctl(fd, FIONREAD, &pending) == 0 ? pending : -1;
}

long agent_pipe_discard(int pipe_fd, int null_fd, long max) {
    if (max <= 0) return 0;
    return (long)splice(pipe_fd, NULL, null_fd, NULL, (size_t)max, SPLICE_F_NONBLOCK);
}

int agent_staging_pipe(int fds[2], int size) {
    if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) return -1;
    if (size > 0) fcntl(fds[1], F_SETPIPE_SZ, size); // best effort: a smaller pipe moves less per call
    return 0;
}

long agent_pipe_splice_staged(int pipe_fd, int staging_read, int staging_write, int null_fd,
                              int file_fd, long long offset, long max, long *unwritten) {
    *unwritten = 0;
    if (max <= 0) return 0;
    ssize_t moved = splice(pipe_fd, NULL, staging_write, NULL, (size_t)max, SPLICE_F_NONBLOCK);
    if (moved <= 0) return (long)moved;
    loff_t at = (loff_t)offset;
    ssize_t done = 0;
    while (done < moved) {
        ssize_t n = splice(staging_read, NULL, file_fd, &at, (size_t)(moved - done), SPLICE_F_NONBLOCK);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        done += n;
    }
    ssize_t rest = moved - done;
    *unwritten = (long)rest;
    // Empties the staging pipe whatever happened (bounded: it holds at most `moved` bytes,
    // and each pass takes at least one or stops).
    while (rest > 0) {
        ssize_t n = null_fd >= 0 ? splice(staging_read, NULL, null_fd, NULL, (size_t)rest, SPLICE_F_NONBLOCK) : -1;
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            char scratch[4096];
            n = read(staging_read, scratch, rest < (ssize_t)sizeof scratch ? (size_t)rest : sizeof scratch);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) break;
        }
        rest -= n;
    }
    return (long)moved;
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

int agent_epoll_add_writable(int epfd, int fd, uint64_t data) {
    struct epoll_event event;
    memset(&event, 0, sizeof(event));
    event.events = EPOLLOUT | EPOLLONESHOT;
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

int agent_peek_exit(pid_t pid, int *wait_status) {
    siginfo_t info;
    memset(&info, 0, sizeof(info));
    int rc;
    do {
        rc = waitid(P_PID, (id_t)pid, &info, WEXITED | WNOHANG | WNOWAIT);
    } while (rc < 0 && errno == EINTR);
    if (rc < 0) return -1;
    if (info.si_pid == 0) return 0;
    switch (info.si_code) {
    case CLD_EXITED: *wait_status = (info.si_status & 0xff) << 8; break;
    case CLD_KILLED: *wait_status = info.si_status & 0x7f; break;
    case CLD_DUMPED: *wait_status = (info.si_status & 0x7f) | 0x80; break;
    default: *wait_status = 0xff00; break;
    }
    return 1;
}

int agent_set_child_subreaper(void) {
    return prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
}

static volatile int sigchld_fd = -1;

static void on_sigchld(int sig) {
    (void)sig;
    int saved = errno;
    uint64_t one = 1;
    if (sigchld_fd >= 0) {
        ssize_t ignored = write(sigchld_fd, &one, sizeof(one));
        (void)ignored;
    }
    errno = saved;
}

int agent_notify_sigchld(int fd) {
    sigchld_fd = fd;
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_sigchld;
    sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
    sigemptyset(&sa.sa_mask);
    return sigaction(SIGCHLD, &sa, NULL);
}

// Reads "pid (comm) S ppid pgrp ..." and returns pgrp, or -1.
static int read_stat(const char *path, pid_t *pgrp, char *state) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    char buf[1024];
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0) return -1;
    buf[n] = 0;
    char *close_paren = strrchr(buf, ')');
    if (close_paren == NULL) return -1;
    int ppid = 0, group = 0;
    char st = 0;
    if (sscanf(close_paren + 1, " %c %d %d", &st, &ppid, &group) != 3) return -1;
    *pgrp = (pid_t)group;
    *state = st;
    return 0;
}

int agent_scan_process_groups(pid_t *pids, pid_t *pgrps, int max) {
    DIR *dir = opendir("/proc");
    if (dir == NULL) return -1;
    int count = 0;
    struct dirent *entry;
    char path[64];
    while ((entry = readdir(dir)) != NULL) {
        if (entry->d_name[0] < '1' || entry->d_name[0] > '9') continue;
        if (count >= max) { count = max + 1; break; }
        snprintf(path, sizeof(path), "/proc/%s/stat", entry->d_name);
        pid_t pgrp;
        char state;
        if (read_stat(path, &pgrp, &state) != 0) continue;
        pids[count] = (pid_t)atoi(entry->d_name);
        pgrps[count] = pgrp;
        count++;
    }
    closedir(dir);
    return count;
}

int agent_list_children(pid_t *out, int max) {
    DIR *dir = opendir("/proc/self/task");
    if (dir == NULL) return -1;
    int count = 0;
    struct dirent *entry;
    char path[96];
    char buf[4096];
    while ((entry = readdir(dir)) != NULL) {
        if (entry->d_name[0] < '0' || entry->d_name[0] > '9') continue;
        snprintf(path, sizeof(path), "/proc/self/task/%s/children", entry->d_name);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) continue;
        // Carry a partial number across reads.
        long value = -1;
        ssize_t n;
        while ((n = read(fd, buf, sizeof(buf))) > 0) {
            for (ssize_t i = 0; i < n; i++) {
                char c = buf[i];
                if (c >= '0' && c <= '9') {
                    value = (value < 0 ? 0 : value * 10) + (c - '0');
                } else if (value >= 0) {
                    if (count >= max) { close(fd); closedir(dir); return max + 1; }
                    out[count++] = (pid_t)value;
                    value = -1;
                }
            }
        }
        if (value >= 0) {
            if (count >= max) { close(fd); closedir(dir); return max + 1; }
            out[count++] = (pid_t)value;
        }
        close(fd);
    }
    closedir(dir);
    return count;
}

void agent_release_free_memory(void) {
    malloc_trim(0);
}

int agent_configure_malloc(int mmap_threshold, int trim_threshold) {
    if (mallopt(M_MMAP_THRESHOLD, mmap_threshold) != 1) return -1;
    if (mallopt(M_TRIM_THRESHOLD, trim_threshold) != 1) return -1;
    return 0;
}

void agent_unblock_sigchld(void) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    pthread_sigmask(SIG_UNBLOCK, &set, NULL);
}

int agent_is_executable(const char *path) {
    struct stat info;
    if (stat(path, &info) != 0 || S_ISDIR(info.st_mode)) return 0;
    return access(path, X_OK) == 0;
}

const void *agent_memmem(const void *haystack, size_t haystack_len, const void *needle, size_t needle_len) {
    return memmem(haystack, haystack_len, needle, needle_len);
}
