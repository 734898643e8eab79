#define _GNU_SOURCE
#include "CGitScan.h"

#include <fcntl.h>
#include <stdio.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

// The guard of the calling thread while it is inside agent_git_unified_diff.
static __thread sigjmp_buf *active_guard;
static struct sigaction previous_bus;
static pthread_once_t install_once = PTHREAD_ONCE_INIT;

static void on_bus(int signo, siginfo_t *info, void *context) {
    sigjmp_buf *guard = active_guard;
    if (guard != NULL) {
        active_guard = NULL;
        siglongjmp(*guard, 1);
    }
    // Not ours: whoever handled SIGBUS before (or the default action) decides.
    if (previous_bus.sa_flags & SA_SIGINFO) {
        if (previous_bus.sa_sigaction != NULL) { previous_bus.sa_sigaction(signo, info, context); return; }
    } else if (previous_bus.sa_handler != SIG_DFL && previous_bus.sa_handler != SIG_IGN) {
        previous_bus.sa_handler(signo);
        return;
    }
    signal(SIGBUS, SIG_DFL);
    raise(SIGBUS);
}

static void install(void) {
    struct sigaction action;
    memset(&action, 0, sizeof(action));
    action.sa_sigaction = on_bus;
    action.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
    sigemptyset(&action.sa_mask);
    sigaction(SIGBUS, &action, &previous_bus);
}

void agent_git_install_fault_guard(void) { pthread_once(&install_once, install); }

// A growing output buffer.
struct out_buffer {
    char *data;
    size_t len;
    size_t cap;
};

static int append(struct out_buffer *b, const char *bytes, size_t len) {
    if (b->len + len > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + len) cap *= 2;
        char *grown = realloc(b->data, cap);
        if (grown == NULL) return -1;
        b->data = grown;
        b->cap = cap;
    }
    memcpy(b->data + b->len, bytes, len);
    b->len += len;
    return 0;
}

// Bytes of patch text built by the last agent_git_unified_diff on this thread.
static __thread size_t last_built;

size_t agent_git_last_diff_built_bytes(void) { return last_built; }

// libgit2's own default (DIFF_MAX_FILESIZE), set explicitly: a larger file is diffed as binary.
#define TEXT_DIFF_MAX_BYTES 0x20000000

// libgit2 calls a file binary when a NUL is in the first 8000 bytes of its content as filtered
// for the object database; CRLF conversion at most halves it, so these raw bytes hold them.
#define BINARY_CHECK_BYTES 16000

// Whether a NUL is in the first BINARY_CHECK_BYTES of the working-tree file `relative`; 1
// also when that cannot be read (not a regular file any more, unreadable): not sure it is text.
static int may_be_binary(git_repository *repo, const char *relative) {
    const char *workdir = git_repository_workdir(repo);
    if (workdir == NULL) return 1;
    size_t base = strlen(workdir), rest = strlen(relative);
    char *path = malloc(base + rest + 1);
    if (path == NULL) return 1;
    memcpy(path, workdir, base);
    memcpy(path + base, relative, rest + 1);
    // Non-blocking: a FIFO put there since the diff was listed must not hang the scan.
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    free(path);
    if (fd < 0) return 1;
    struct stat info;
    if (fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
        close(fd);
        return 1;
    }
    char bytes[BINARY_CHECK_BYTES];
    size_t have = 0;
    while (have < sizeof(bytes)) {
        ssize_t n = read(fd, bytes + have, sizeof(bytes) - have);
        if (n < 0) {
            close(fd);
            return 1;
        }
        if (n == 0) break;
        have += (size_t)n;
    }
    close(fd);
    return memchr(bytes, 0, have) != NULL;
}

// Whether the patch of delta `index` surely exceeds `room` bytes, found without building it.
// A new text file's patch holds every byte of the file (each line behind its '+'; CRLF
// turned to LF still leaves one byte per line removed), so a new file larger than the room
// cannot fit. Anything else answers no, and its patch is built and measured: a modified
// file's patch may be small however large the file, a binary file's is a line, and
// attributes may make a file binary (`-diff`), hand it to a driver (`diff=<name>`) or shrink
// it (`ident`).
static int cannot_fit(git_repository *repo, git_diff *diff, size_t index, size_t room) {
    const git_diff_delta *delta = git_diff_get_delta(diff, index);
    if (delta == NULL || (delta->status != GIT_DELTA_ADDED && delta->status != GIT_DELTA_UNTRACKED)) return 0;
    const git_diff_file *file = &delta->new_file;
    if (file->path == NULL || file->size <= (git_object_size_t)room) return 0;
    if (file->size > (git_object_size_t)TEXT_DIFF_MAX_BYTES) return 0;
    if (file->mode != GIT_FILEMODE_BLOB && file->mode != GIT_FILEMODE_BLOB_EXECUTABLE) return 0;
    if (delta->flags & GIT_DIFF_FLAG_BINARY) return 0;
    const char *value = NULL;
    if (git_attr_get(&value, repo, 0, file->path, "diff") != 0) {
        git_error_clear();
        return 0;
    }
    git_attr_value_t kind = git_attr_value(value);
    if (kind != GIT_ATTR_VALUE_UNSPECIFIED && kind != GIT_ATTR_VALUE_TRUE) return 0;
    if (git_attr_get(&value, repo, 0, file->path, "ident") != 0) {
        git_error_clear();
        return 0;
    }
    kind = git_attr_value(value);
    if (kind != GIT_ATTR_VALUE_UNSPECIFIED && kind != GIT_ATTR_VALUE_FALSE) return 0;
    return !may_be_binary(repo, file->path);
}

// Appends `prefix` + `path` as git writes a path in a diff header: in double quotes, with C
// escapes and octal for other bytes, when it holds a quote, a backslash, a control byte or a
// byte past 0x7E (core.quotePath's default).
static int append_path(struct out_buffer *out, const char *prefix, const char *path) {
    int quote = 0;
    for (const unsigned char *c = (const unsigned char *)path; *c != 0; c++) {
        if (*c == '"' || *c == '\\' || *c < 0x20 || *c >= 0x7F) quote = 1;
    }
    if (!quote) return append(out, prefix, strlen(prefix)) || append(out, path, strlen(path));
    if (append(out, "\"", 1) || append(out, prefix, strlen(prefix))) return -1;
    for (const unsigned char *c = (const unsigned char *)path; *c != 0; c++) {
        const char *named = NULL;
        switch (*c) {
        case '\a': named = "\\a"; break;
        case '\b': named = "\\b"; break;
        case '\t': named = "\\t"; break;
        case '\n': named = "\\n"; break;
        case '\v': named = "\\v"; break;
        case '\f': named = "\\f"; break;
        case '\r': named = "\\r"; break;
        case '"': named = "\\\""; break;
        case '\\': named = "\\\\"; break;
        default: break;
        }
        char octal[5];
        if (named == NULL && (*c < 0x20 || *c >= 0x7F)) {
            octal[0] = '\\';
            octal[1] = (char)('0' + ((*c >> 6) & 7));
            octal[2] = (char)('0' + ((*c >> 3) & 7));
            octal[3] = (char)('0' + (*c & 7));
            octal[4] = 0;
            named = octal;
        }
        int rc = named != NULL ? append(out, named, strlen(named)) : append(out, (const char *)c, 1);
        if (rc != 0) return -1;
    }
    return append(out, "\"", 1);
}

// The header git prints for a new or changed working-tree file past TEXT_DIFF_MAX_BYTES
// (binary unseen), without its `index` line: git hashes the whole file for it (43 s for
// 4 GiB here). libgit2 cannot be left to it: past the limit it prints `old mode 0` and
// `/dev/null` for both sides, and it keeps a working-tree file's size in 32 bits, so a file
// of 4 GiB (or 4 GiB + a little) reads as small, fails its read, and fails the whole scan.
// Returns 1 when it wrote the delta (0: not such a file; -1: out of memory).
static int large_file_patch(git_repository *repo, const git_diff_delta *delta, struct out_buffer *out) {
    int added = delta->status == GIT_DELTA_ADDED || delta->status == GIT_DELTA_UNTRACKED;
    if (!added && delta->status != GIT_DELTA_MODIFIED) return 0;
    const git_diff_file *new_file = &delta->new_file;
    if (new_file->path == NULL || (new_file->mode != GIT_FILEMODE_BLOB && new_file->mode != GIT_FILEMODE_BLOB_EXECUTABLE)) return 0;
    const char *workdir = git_repository_workdir(repo);
    if (workdir == NULL) return 0;
    size_t base = strlen(workdir), rest = strlen(new_file->path);
    char *path = malloc(base + rest + 1);
    if (path == NULL) return -1;
    memcpy(path, workdir, base);
    memcpy(path + base, new_file->path, rest + 1);
    struct stat info;
    int large = lstat(path, &info) == 0 && S_ISREG(info.st_mode) && (unsigned long long)info.st_size > TEXT_DIFF_MAX_BYTES;
    free(path);
    if (!large) return 0;
    const char *name = new_file->path;
    char modes[64];
    if (append(out, "diff --git ", 11) || append_path(out, "a/", added ? name : delta->old_file.path) || append(out, " ", 1)) return -1;
    if (append_path(out, "b/", name) || append(out, "\n", 1)) return -1;
    if (added) {
        snprintf(modes, sizeof(modes), "new file mode %o\n", new_file->mode);
        if (append(out, modes, strlen(modes)) || append(out, "Binary files /dev/null and ", 27)) return -1;
    } else {
        if (delta->old_file.mode != new_file->mode) {
            snprintf(modes, sizeof(modes), "old mode %o\nnew mode %o\n", delta->old_file.mode, new_file->mode);
            if (append(out, modes, strlen(modes))) return -1;
        }
        if (append(out, "Binary files ", 13) || append_path(out, "a/", delta->old_file.path) || append(out, " and ", 5)) return -1;
    }
    if (append_path(out, "b/", name) || append(out, " differ\n", 8)) return -1;
    return 1;
}

// The diff itself; every libgit2 object it makes is freed unless a fault abandons it.
static int unified_diff(git_repository *repo, size_t max_bytes, struct out_buffer *out, int *truncated) {
    git_object *tree = NULL;
    int rc = git_revparse_single(&tree, repo, "HEAD^{tree}");
    if (rc != 0) {
        // Only an unborn branch (no commit yet) is diffed against the empty tree, everything
        // new; a HEAD that cannot be read (corrupt, its commit missing) fails the scan, or the
        // whole repository would be sent as added files.
        if (git_repository_head_unborn(repo) != 1) return rc;
        tree = NULL;
        git_error_clear();
    }
    git_diff_options options;
    rc = git_diff_options_init(&options, GIT_DIFF_OPTIONS_VERSION);
    if (rc != 0) { git_object_free(tree); return rc; }
    options.flags = GIT_DIFF_INCLUDE_UNTRACKED | GIT_DIFF_RECURSE_UNTRACKED_DIRS | GIT_DIFF_SHOW_UNTRACKED_CONTENT;
    options.context_lines = 3;
    options.max_size = TEXT_DIFF_MAX_BYTES;
    git_diff *diff = NULL;
    rc = git_diff_tree_to_workdir_with_index(&diff, repo, (git_tree *)tree, &options);
    git_object_free(tree);
    if (rc != 0) return rc;
    git_diff_find_options find;
    git_diff_find_options_init(&find, GIT_DIFF_FIND_OPTIONS_VERSION);
    find.flags = GIT_DIFF_FIND_RENAMES;
    git_diff_find_similar(diff, &find);

    // Tracked changes first, then untracked files, as the reference's `git diff HEAD` and
    // then its untracked batches: a diff cut at the cap keeps the tracked changes.
    size_t count = git_diff_num_deltas(diff);
    for (size_t step = 0; step < 2 * count && rc == 0 && !*truncated; step++) {
        size_t index = step % count;
        const git_diff_delta *delta = git_diff_get_delta(diff, index);
        int untracked = delta != NULL && delta->status == GIT_DELTA_UNTRACKED;
        if (untracked != (step >= count)) continue;
        size_t before = out->len;
        int large = large_file_patch(repo, delta, out);
        if (large < 0) { rc = -1; break; }
        if (large > 0) {
            last_built += out->len - before;
            if (out->len > max_bytes) {
                out->len = before;
                *truncated = 1;
            }
            continue;
        }
        // A file whose patch cannot fit ends the diff as a measured one would, unbuilt: a
        // 300 MiB untracked file cost several times its size (patch lines, text) every scan.
        if (cannot_fit(repo, diff, index, max_bytes - out->len)) {
            *truncated = 1;
            break;
        }
        git_patch *patch = NULL;
        rc = git_patch_from_diff(&patch, diff, index);
        if (rc != 0) break;
        git_buf text = GIT_BUF_INIT;
        rc = git_patch_to_buf(&text, patch);
        git_patch_free(patch);
        if (rc != 0) { git_buf_dispose(&text); break; }
        last_built += text.size;
        if (out->len + text.size > max_bytes) {
            *truncated = 1;
            git_buf_dispose(&text);
            break;
        }
        rc = append(out, text.ptr, text.size);
        git_buf_dispose(&text);
        if (rc != 0) break;
    }
    git_diff_free(diff);
    return rc;
}

int agent_git_unified_diff(git_repository *repo, size_t max_bytes, char **out, size_t *out_len, int *truncated) {
    agent_git_install_fault_guard();
    // Volatile: read after a siglongjmp.
    struct out_buffer *volatile buffer = calloc(1, sizeof(struct out_buffer));
    if (buffer == NULL) return -1;
    *truncated = 0;
    last_built = 0;
    sigjmp_buf guard;
    if (sigsetjmp(guard, 1) != 0) {
        // A mapped working-tree file shrank under the scan: everything it made is left.
        free(buffer->data);
        free(buffer);
        return AGENT_GIT_FILE_CHANGED;
    }
    active_guard = &guard;
    int rc = unified_diff(repo, max_bytes, buffer, truncated);
    active_guard = NULL;
    if (rc != 0) {
        free(buffer->data);
        free(buffer);
        return rc;
    }
    *out = buffer->data;
    *out_len = buffer->len;
    free(buffer);
    return 0;
}
