// CAgentSpawn: the few process primitives Swift cannot express safely.
//
// `agent_spawn` starts a child (clone with CLONE_VM|CLONE_VFORK, as posix_spawn does) with
// everything the process API needs set
// *before* exec (so no grandchild can escape it): a new process group, an empty signal
// mask and default dispositions (Swift's concurrency threads block most signals and the
// mask is inherited), stdin from /dev/null, stdout and stderr on one pipe, a working
// directory, oom_score_adj, nice and the original RLIMIT_NOFILE. Between fork and exec the
// child calls only async-signal-safe functions, and all signals stay blocked until its
// dispositions are reset.
#ifndef CAGENTSPAWN_H
#define CAGENTSPAWN_H

#include <spawn.h>
#include <stdint.h>
#include <sys/types.h>

static const int AGENT_SPAWN_KEEP = (-2147483647 - 1);

/// Which step failed in the child, reported through the CLOEXEC error pipe.
enum agent_spawn_step {
    AGENT_SPAWN_STEP_NONE = 0,
    AGENT_SPAWN_STEP_FORK = 1,
    AGENT_SPAWN_STEP_STDIN = 2,
    AGENT_SPAWN_STEP_DUP = 3,
    AGENT_SPAWN_STEP_CHDIR = 4,
    AGENT_SPAWN_STEP_EXEC = 5,
    AGENT_SPAWN_STEP_PIPE = 6,
};

typedef struct agent_spawn_options {
    const char *path;           // executable (absolute or relative to cwd)
    char *const *argv;          // NULL-terminated
    char *const *envp;          // NULL-terminated
    const char *cwd;            // NULL or "" keeps the agent's cwd
    int output_fd;              // becomes fd 1 and 2 in the child
    int oom_score_adj;          // AGENT_SPAWN_KEEP to leave unchanged
    int nice_value;             // absolute nice; AGENT_SPAWN_KEEP to leave unchanged
    long long nofile_soft;      // RLIMIT_NOFILE soft limit for the child; < 0 to leave unchanged
    int parent_death_signal;    // sent to the child when the spawning *thread* ends; 0 for none
    int error_fd;               // becomes fd 2 instead of output_fd when >= 0
    int new_session;            // 1: setsid() (a new session and group), 0: a new group only,
                                // 2: the caller's group (in its terminal's foreground)
    int input_fd;               // becomes fd 0 when >= 0; < 0: /dev/null
    int controlling_terminal;   // 1: fd 0 (a terminal) becomes the controlling terminal of the
                                // new session (needs new_session); 0: none
} agent_spawn_options;

/// Spawns a child. Returns its pid (> 0), or -1 with `*failed_step` and `*child_errno` set.
pid_t agent_spawn(const agent_spawn_options *options, int *failed_step, int *child_errno);

/// `agent_spawn`, and the child's pidfd in `*pidfd` (CLONE_PIDFD, close-on-exec), or -1
/// when the kernel gave none (it ignores or refuses the flag: use agent_pidfd_open, which
/// needs Linux 5.3). NULL: no pidfd.
pid_t agent_spawn_pidfd(const agent_spawn_options *options, int *failed_step, int *child_errno, int *pidfd);

/// pidfd_open(2); -1 with errno on failure. The descriptor is close-on-exec.
int agent_pidfd_open(pid_t pid);

/// 1 when `path` names something that is not a directory and that this process may execute
/// (what Go's exec.LookPath accepts), else 0.
int agent_is_executable(const char *path);

/// A pipe whose read end (fds[0]) is non-blocking; both ends close-on-exec. Returns 0 or -1.
int agent_output_pipe(int fds[2], int pipe_size);

/// A pipe for a child's stdin: the write end (fds[1]) is non-blocking; both ends
/// close-on-exec. Returns 0 or -1.
int agent_input_pipe(int fds[2]);

/// A pseudo-terminal pair: `*primary` (non-blocking, close-on-exec) stays with the agent,
/// `*secondary` (close-on-exec) becomes the child's fd 0, 1 and 2. The window size is set
/// to rows x cols. Returns 0, or -1 with errno (nothing left open).
int agent_open_pty(int *primary, int *secondary, unsigned short rows, unsigned short cols);

/// TIOCSWINSZ on a terminal: the kernel sends SIGWINCH to its foreground group. 0 or -1.
int agent_pty_resize(int fd, unsigned short rows, unsigned short cols);

/// 1 while the terminal is in canonical (line) mode, 0 once a program has made it raw,
/// -1 when it cannot be read.
int agent_pty_is_canonical(int fd);

/// The terminal's end-of-file character (VEOF, normally ^D), or 4 when it cannot be read.
int agent_pty_eof_char(int fd);

/// The number N of the terminal `/dev/pts/N` whose primary side is `fd`, or -1.
int agent_pty_number(int fd);

/// Applies one SSH terminal mode (RFC 4254 section 8: opcode and value) to the terminal's
/// settings; speeds and unknown opcodes are ignored. 0, or -1 with errno.
int agent_pty_set_mode(int fd, int opcode, unsigned int value);

/// Reclaims this process's clean read-only file pages (code and constants of the binary and
/// its libraries) with madvise(MADV_PAGEOUT): what start-up ran and will not run again stops
/// counting in the agent's resident set. Pages no other process maps leave the page cache,
/// so code used again is read back from the file (a major fault). Mappings holding private
/// or writable memory are left alone, and this process's own mapping of pages is dropped
/// (MADV_DONTNEED) only inside the read-only segments of objects the loader lists, under
/// its lock, so a library loading meanwhile loses nothing. Safe to call at any time.
/// Returns the mappings advised, or -1 (no smaps).
int agent_release_file_pages(void);

/// glibc's memmem (linear time, two-way algorithm), hidden from Swift without _GNU_SOURCE.
const void *agent_memmem(const void *haystack, size_t haystack_len, const void *needle, size_t needle_len);

/// Names the calling thread (pthread_setname_np; the kernel keeps 15 bytes).
int agent_set_thread_name(const char *name);

/// posix_spawn file actions glibc has but Swift's Glibc module (no _GNU_SOURCE) hides:
/// close every descriptor from `low` up, and change directory (tests' child programs).
int agent_spawn_actions_close_from(posix_spawn_file_actions_t *actions, int low);
int agent_spawn_actions_chdir(posix_spawn_file_actions_t *actions, const char *path);

/// Bytes waiting in a pipe (FIONREAD), or -1.
int agent_pipe_pending(int fd);

/// Moves up to `max` bytes from a pipe to `null_fd` (/dev/null) with splice: the kernel
/// drops the pipe's pages without copying them to user space. Bytes moved, or -1 (errno).
long agent_pipe_discard(int pipe_fd, int null_fd, long max);

/// Makes the staging pipe of `agent_pipe_splice_staged`: both ends non-blocking and
/// close-on-exec, `size` bytes of room (best effort). 0, or -1 (errno).
int agent_staging_pipe(int fds[2], int size);

/// Moves up to `max` bytes from a pipe into a regular file at `offset` without a pass through
/// user space, through `staging` (an empty pipe of the caller's, made by
/// `agent_staging_pipe`): the pipe-to-pipe splice moves page references and holds the source
/// pipe's lock only for that, so the source's writer goes on while the kernel copies the
/// pages into the page cache under the staging pipe's lock (a direct splice into the file
/// holds the source's lock across that copy and stalls the writer). Returns the bytes taken
/// from `pipe_fd` (0: none waiting; -1: errno). `*unwritten` is how many of them did not
/// reach the file (a write error): they are dropped, so the staging pipe is empty again.
long agent_pipe_splice_staged(int pipe_fd, int staging_read, int staging_write, int null_fd,
                              int file_fd, long long offset, long max, long *unwritten);

/// eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC); -1 with errno on failure.
int agent_eventfd(void);

/// epoll without the packed `struct epoll_event` (awkward from Swift). Level-triggered EPOLLIN.
int agent_epoll_create(void);
int agent_epoll_add(int epfd, int fd, uint64_t data);
/// One-shot EPOLLOUT (with EPOLLERR/EPOLLHUP, always reported): for a writer waiting on a
/// full pipe or terminal. Delete it after it fires or is given up.
int agent_epoll_add_writable(int epfd, int fd, uint64_t data);
int agent_epoll_del(int epfd, int fd);
/// Waits and stores each ready descriptor's data word in `out`; returns the count or -1.
int agent_epoll_wait(int epfd, uint64_t *out, int max, int timeout_ms);
/// The same with a timeout in nanoseconds (epoll_pwait2; rounded up to milliseconds on
/// kernels without it); a negative timeout waits for ever.
int agent_epoll_wait_ns(int epfd, uint64_t *out, int max, long long timeout_ns);
/// Turns a descriptor's EPOLLIN on or off (off, its hang-up and errors still wake).
int agent_epoll_set_readable(int epfd, int fd, uint64_t data, int readable);

/// waitid(WNOWAIT): 1 with `*wait_status` (waitpid's encoding) if the child has exited, in
/// which case it stays a zombie until reaped; 0 if it is still running; -1 with errno.
int agent_peek_exit(pid_t pid, int *wait_status);

/// prctl(PR_SET_CHILD_SUBREAPER, 1): orphaned descendants are re-parented to this process.
int agent_set_child_subreaper(void);

/// Installs a SIGCHLD handler (SA_RESTART | SA_NOCLDSTOP) that writes 1 to eventfd `fd`.
int agent_notify_sigchld(int fd);

/// Unblocks SIGCHLD on the calling thread.
void agent_unblock_sigchld(void);

/// Every process's pid and process group from /proc; returns the count, max + 1 when more
/// than `max` exist, or -1.
int agent_scan_process_groups(pid_t *pids, pid_t *pgrps, int max);

/// This process's children (all threads); the count, max + 1 when more, or -1.
int agent_list_children(pid_t *out, int max);

/// malloc_trim(0): returns free heap pages of every arena to the OS.
void agent_release_free_memory(void);

/// Fixes glibc's mmap threshold at `mmap_threshold` bytes and its trim threshold at
/// `trim_threshold` bytes (mallopt), ending their growth after large frees; 0 on success.
int agent_configure_malloc(int mmap_threshold, int trim_threshold);

#endif
