// Ends a test process that has run past AGENT_TEST_RUN_LIMIT_SECONDS, and every process
// under it. Swift Testing's time limit only cancels a test: one that waits on something
// cancellation does not reach keeps the run open for ever, and CI ends at its own
// deadline with nothing said. This turns that into a failure that names its cause.
#define _GNU_SOURCE
#include "CTestWatchdog.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static long limit_seconds;

long agent_test_watchdog_limit(void) { return limit_seconds; }

/// The parent of `pid` from /proc/<pid>/stat, or -1.
static pid_t parent_of(pid_t pid) {
    char path[64], text[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *file = fopen(path, "re");
    if (!file) return -1;
    size_t length = fread(text, 1, sizeof text - 1, file);
    fclose(file);
    text[length] = 0;
    // "pid (comm) state ppid ...": comm may hold spaces and parentheses; the last ')' ends it.
    char *end = strrchr(text, ')');
    int parent;
    char state;
    if (!end || sscanf(end + 1, " %c %d", &state, &parent) != 2) return -1;
    return (pid_t)parent;
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

/// Stops every process under `root` not stopped yet (a stopped process cannot fork, and
/// its children stay its children); returns how many were new.
static int stop_new_descendants(pid_t root) {
    DIR *proc = opendir("/proc");
    if (!proc) return 0;
    int added = 0;
    struct dirent *entry;
    while ((entry = readdir(proc)) && found_count < MAX_DESCENDANTS) {
        pid_t pid = (pid_t)atoi(entry->d_name);
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
    closedir(proc);
    return added;
}

static void *watch(void *unused) {
    (void)unused;
    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_sec += limit_seconds;
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &deadline, NULL) == EINTR) {}
    dprintf(2,
            "\ntest watchdog: the test process ran past its %ld s (AGENT_TEST_RUN_LIMIT_SECONDS): a test "
            "that did not end after its time limit holds the run (see \"Time limit was exceeded\" above). "
            "Ending the process and those under it.\n",
            limit_seconds);
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
    if (*end != 0 || seconds <= 0) return;
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
