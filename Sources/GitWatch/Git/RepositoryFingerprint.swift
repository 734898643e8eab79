import AgentCore
import CGit2
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

/// A cheap summary of everything a repository's snapshot depends on, so that a poll which
/// finds it unchanged skips the diff (the reference's newest-form fingerprint, read
/// with libgit2 instead of three git processes): HEAD's target and branch, the origin URL,
/// and for each path that differs from HEAD its status, its staged blob and its file's
/// size, times, inode and mode. Two equal fingerprints mean an unchanged diff unless a file
/// was rewritten within the same nanosecond timestamp with the same size.
public enum RepositoryFingerprint {
    /// The SHA-256 of the summary, as hex.
    public static func compute(root: String) throws(GitError) -> String {
        GitLibrary.ensure()
        var repository: OpaquePointer?
        try GitError.check(git_repository_open(&repository, root), "git_repository_open")
        defer { git_repository_free(repository) }
        var hash = SHA256()
        hash.update(Array(GitSnapshotter.branch(repository).utf8) + [0])
        hash.update(Array(GitSnapshotter.origin(repository).utf8) + [0])
        var head = git_oid()
        if git_reference_name_to_id(&head, repository, "HEAD") == 0 {
            withUnsafeBytes(of: &head.id) { hash.update($0) }
        }

        var options = git_status_options()
        try GitError.check(git_status_options_init(&options, UInt32(GIT_STATUS_OPTIONS_VERSION)), "git_status_options_init")
        options.show = GIT_STATUS_SHOW_INDEX_AND_WORKDIR
        options.flags = GIT_STATUS_OPT_INCLUDE_UNTRACKED.rawValue | GIT_STATUS_OPT_RECURSE_UNTRACKED_DIRS.rawValue
        var list: OpaquePointer?
        try GitError.check(git_status_list_new(&list, repository, &options), "git_status_list_new")
        defer { git_status_list_free(list) }
        let count = git_status_list_entrycount(list)
        for index in 0..<count {
            guard let entry = git_status_byindex(list, index)?.pointee else { continue }
            var status = entry.status.rawValue
            withUnsafeBytes(of: &status) { hash.update($0) }
            if let delta = entry.head_to_index?.pointee {
                var staged = delta.new_file.id
                withUnsafeBytes(of: &staged.id) { hash.update($0) }
                if let path = delta.new_file.path { hash.update(UnsafeRawBufferPointer(start: path, count: strlen(path) + 1)) }
            }
            guard let delta = entry.index_to_workdir?.pointee, let path = delta.new_file.path else { continue }
            hash.update(UnsafeRawBufferPointer(start: path, count: strlen(path) + 1))
            let stamp = FileStamp.of(root + "/" + String(cString: path))
            stamp.withUnsafeBytes { hash.update($0) }
        }
        return SHA256.hexString(hash.finalize())
    }
}
