import AgentCore

/// Git watching's own threads for libgit2 (scans, repository lookups, `show`): a huge
/// repository cannot stop the file API, nor a slow file request stop git watching.
/// Bounded: 2 threads; at most 1024 reads waiting (beyond, a repository's scan is skipped
/// and read at the next scan, paths are looked up then, and a `show` answers 503).
enum GitPool {
    static let shared = BlockingPool(name: "git", threads: 2, maxQueued: 1024)
}
