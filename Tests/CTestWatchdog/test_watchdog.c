// Ends a test process that has run past AGENT_TEST_RUN_LIMIT_SECONDS, and every process
// under it. Swift Testing's time limit only cancels a test: one that waits on something
// cancellation does not reach keeps the run open for ever, and CI ends at its own
// deadline with nothing said. This turns that into a failure that names its cause.
//
// When it fires, the process may be in any state (a lock held, no descriptor free), so the
// watchdog uses no malloc and no stdio then: /proc and a spare descriptor are opened when it
// is armed, and /proc is read with getdents64, openat and read into its own buffers.
#define _GNU_SOURCE
#include "CTestWatchdog.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static long limit_seconds;
static int proc_fd = -1;
/// Held from arming until the watchdog fires, then closed so that its openat has a number.
static int spare_fd = -1;
static char message[512];
static size_t message_length;

long agent_test_watchdog_limit(void) { return limit_seconds; }

/// The parent of `pid` from /proc/<pid>/stat, or -1.
static pid_t parent_of(pid_t pid) {
    char path[32], text[512];
    snprintf(path, sizeof path, "%d/stat", (int)pid);
    int fd = openat(proc_fd, path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    ssize_t length = read(fd, text, sizeof text - 1);
    close(fd);
    if (length <= 0) return -1;
    text[length] = 0;
    // "pid (comm) state ppid ...": comm may hold spaces and parentheses; the last ')' ends it.
    char *end = strrchr(text, ')');
    if (!end || end[1] != ' ' || end[2] == 0 || end[3] != ' ') return -1;
    return (pid_t)strtol(end + 4, NULL, 10);
}

/// Up to this many descendants are ended (bounded: a fixed array, no allocation).
#define MAX_DESCENDANTS 4096
static pid_t found[MAX_DESCENDANTS];
static int found_count;

static int is_found(pid_t pid) {
    for (int i = 0; i < found_count; i++)
        if (found[i] == pid) return 1;
    return 0;
}

struct linux_dirent64 {
    uint64_t d_ino;
    int64_t d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[];
};

/// Stops every process under `root` not stopped yet (a stopped process cannot fork, and
/// its children stay its children); returns how many were new.
static int stop_new_descendants(pid_t root) {
    static char entries[32768];
    int added = 0;
    if (lseek(proc_fd, 0, SEEK_SET) < 0) return 0;
    for (;;) {
        long length = syscall(SYS_getdents64, proc_fd, entries, sizeof entries);
        if (length <= 0) break;
        for (long offset = 0; offset < length && found_count < MAX_DESCENDANTS;) {
            struct linux_dirent64 *entry = (struct linux_dirent64 *)(entries + offset);
            offset += entry->d_reclen;
            pid_t pid = (pid_t)strtol(entry->d_name, NULL, 10);
            if (pid <= 0 || pid == root || is_found(pid)) continue;
            pid_t step = pid;
            for (int depth = 0; depth < 64 && step > 1; depth++) {
                step = parent_of(step);
                if (step == root) {
                    kill(pid, SIGSTOP);
                    found[found_count++] = pid;
                    added++;
                    break;
                }
            }
        }
    }
    return added;
}

static void *watch(void *unused) {
    (void)unused;
    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_sec += limit_seconds;
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &deadline, NULL) == EINTR) {}
    ssize_t unused_written = write(2, message, message_length);
    (void)unused_written;
    close(spare_fd);
    pid_t self = getpid();
    for (int pass = 0; pass < 8 && stop_new_descendants(self) > 0; pass++) {}
    for (int i = 0; i < found_count; i++) kill(found[i], SIGKILL);
    _exit(124);
    return NULL;
}

__attribute__((constructor)) static void arm(void) {
    const char *text = getenv("AGENT_TEST_RUN_LIMIT_SECONDS");
    if (!text) return;
    char *end;
    long seconds = strtol(text, &end, 10);
    // At most a year: the deadline's arithmetic must not overflow.
    if (end == text || *end != 0 || seconds <= 0 || seconds > 366L * 24 * 3600) return;
    proc_fd = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (proc_fd < 0 || spare_fd < 0) return;
    int length = snprintf(message, sizeof message,
                          "\ntest watchdog: the test process ran past its %ld s (AGENT_TEST_RUN_LIMIT_SECONDS): a test "
                          "that did not end after its time limit holds the run (see \"Time limit was exceeded\" "
                          "above). Ending the process and those under it.\n",
                          seconds);
    message_length = length > 0 && (size_t)length < sizeof message ? (size_t)length : 0;
    limit_seconds = seconds;
    pthread_attr_t attributes;
    pthread_t thread;
    pthread_attr_init(&attributes);
    pthread_attr_setdetachstate(&attributes, PTHREAD_CREATE_DETACHED);
    // Signals go to the test's own threads, never this one.
    sigset_t all, previous;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &previous);
    if (pthread_create(&thread, &attributes, watch, NULL) != 0) limit_seconds = 0;
    pthread_sigmask(SIG_SETMASK, &previous, NULL);
    pthread_attr_destroy(&attributes);
}
