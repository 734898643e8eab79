#include "CHostStats.h"

#include <sys/vfs.h>

int host_stats_statfs(const char *path, host_stats_fs *out) {
    struct statfs info;
    if (statfs(path, &info) != 0) {
        return -1;
    }
    out->type = (uint64_t)info.f_type;
    out->blocks = (uint64_t)info.f_blocks;
    out->free_blocks = (uint64_t)info.f_bfree;
    out->block_size = (int64_t)info.f_bsize;
    return 0;
}
