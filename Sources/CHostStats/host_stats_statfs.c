#include "CHostStats.h"

#include <sys/vfs.h>

static void fill(const struct statfs *from, host_stats_fs *out) {
    const struct statfs info = *from;
    out->type = (uint64_t)info.f_type;
    out->blocks = (uint64_t)info.f_blocks;
    out->free_blocks = (uint64_t)info.f_bfree;
    out->block_size = (int64_t)info.f_bsize;
}

int host_stats_statfs(const char *path, host_stats_fs *out) {
    struct statfs info;
    if (statfs(path, &info) != 0) return -1;
    fill(&info, out);
    return 0;
}

int host_stats_fstatfs(int fd, host_stats_fs *out) {
    struct statfs info;
    if (fstatfs(fd, &info) != 0) return -1;
    fill(&info, out);
    return 0;
}
