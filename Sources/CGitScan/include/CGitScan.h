#ifndef CGITSCAN_H
#define CGITSCAN_H

#include <stddef.h>
#include <git2.h>

/// Returned by agent_git_unified_diff when a working-tree file shrank under libgit2's
/// mapping of it (SIGBUS): the scan failed and is tried again; the agent lives on.
#define AGENT_GIT_FILE_CHANGED (-1000)

/// Installs the SIGBUS handler that turns a fault inside agent_git_unified_diff (on the
/// faulting thread only) into AGENT_GIT_FILE_CHANGED; any other SIGBUS goes to the handler
/// that was there before (the Swift runtime's backtracer, or the default: the process ends).
/// Idempotent.
void agent_git_install_fault_guard(void);

/// The working tree (with the index) against HEAD's tree as `git diff HEAD` prints it,
/// untracked files as new files, renames found as git's `diff.renames` does, three lines of
/// context; cut at a file boundary before `max_bytes`. An unborn branch is diffed against the
/// empty tree; a HEAD that cannot be read (corrupt, its commit missing) is an error. On
/// success (0) `*out` is a malloc'd buffer of `*out_len` bytes the caller frees, and
/// `*truncated` says whether files were left out. Negative: a libgit2 error
/// (git_error_last), or AGENT_GIT_FILE_CHANGED. A new text file larger than what is left of
/// `max_bytes` is left out without its patch being built (its patch holds all of it).
///
/// libgit2 maps unfiltered working-tree files with mmap(2) to diff them; a file truncated
/// meanwhile (an editor's save, `>` in a shell) faults on the pages past its new end. The
/// whole diff runs under sigsetjmp on this thread, so such a fault abandons the scan (its
/// libgit2 objects are leaked, a few KiB per fault) instead of ending the agent.
int agent_git_unified_diff(git_repository *repo, size_t max_bytes, char **out, size_t *out_len, int *truncated);

/// Bytes of patch text the last agent_git_unified_diff on the calling thread built, kept or
/// not (tests: a file whose patch cannot fit is never built).
size_t agent_git_last_diff_built_bytes(void);

#endif
