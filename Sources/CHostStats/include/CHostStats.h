#ifndef C_HOST_STATS_H
#define C_HOST_STATS_H

#include <stdint.h>

/// statfs(2)'s figures the stat command reads (Swift's Glibc module has no <sys/vfs.h>).
typedef struct {
    uint64_t type;
    uint64_t blocks;
    uint64_t free_blocks;
    int64_t block_size;
} host_stats_fs;

/// statfs(path): 0 and the figures, or -1 with errno set.
int host_stats_statfs(const char *path, host_stats_fs *out);

/// fstatfs(fd): the same for an open descriptor.
int host_stats_fstatfs(int fd, host_stats_fs *out);

#endif
