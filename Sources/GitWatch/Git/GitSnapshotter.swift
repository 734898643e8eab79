import AgentCore
import CGit2
import CGitScan
import CoreMetrics
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

/// Reads repositories with libgit2, in process (the reference forks the git CLI). A
/// repository handle is opened, used and freed within one call, on the calling thread, so
/// no libgit2 object is ever shared between threads.
public enum GitSnapshotter {
    /// A repository's diff is cut at a file boundary past this many bytes.
    public static let maxDiffBytes = 3 << 20

    /// The innermost repository containing `path` (its working-tree root), or nil.
    public static func repositoryRoot(containing path: String) -> String? {
        GitLibrary.ensure()
        var repository: OpaquePointer?
        guard git_repository_open_ext(&repository, path, 0, nil) == 0, let repository else { return nil }
        defer { git_repository_free(repository) }
        guard let workdir = git_repository_workdir(repository) else { return nil }
        let root = String(cString: workdir)
        return root.count > 1 && root.hasSuffix("/") ? String(root.dropLast()) : root
    }

    /// The snapshot of the repository whose working tree is `root`.
    public static func snapshot(root: String, maxDiffBytes: Int = maxDiffBytes) throws(GitError) -> RepositorySnapshot {
        GitLibrary.ensure()
        var repository: OpaquePointer?
        try GitError.check(git_repository_open(&repository, root), "git_repository_open")
        defer { git_repository_free(repository) }
        let (diff, truncated) = try unifiedDiff(repository, maxBytes: maxDiffBytes)
        return RepositorySnapshot(
            repoRoot: root, branch: branch(repository), remoteOrigin: origin(repository), unifiedDiff: diff, diffTruncated: truncated)
    }

    /// The checked-out branch's short name; "" when detached. An unborn branch (no commit
    /// yet) is named from HEAD's symbolic target.
    static func branch(_ repository: OpaquePointer?) -> String {
        if git_repository_head_detached(repository) == 1 { return "" }
        var head: OpaquePointer?
        if git_repository_head(&head, repository) == 0, let head {
            defer { git_reference_free(head) }
            return git_reference_shorthand(head).map { String(cString: $0) } ?? ""
        }
        // Unborn: HEAD points at a branch that does not exist yet.
        var symbolic: OpaquePointer?
        guard git_reference_lookup(&symbolic, repository, "HEAD") == 0, let symbolic else { return "" }
        defer { git_reference_free(symbolic) }
        guard let target = git_reference_symbolic_target(symbolic) else { return "" }
        let name = String(cString: target)
        return name.hasPrefix("refs/heads/") ? String(name.dropFirst("refs/heads/".count)) : name
    }

    static func origin(_ repository: OpaquePointer?) -> String {
        var config: OpaquePointer?
        guard git_repository_config_snapshot(&config, repository) == 0, let config else { return "" }
        defer { git_config_free(config) }
        var value: UnsafePointer<CChar>?
        guard git_config_get_string(&value, config, "remote.origin.url") == 0, let value else { return "" }
        return String(cString: value)
    }

    /// The working tree (with the index) against HEAD's tree, as `git diff HEAD` prints it,
    /// then each untracked, non-ignored file as a new file; cut at a file boundary. Runs in
    /// C under a SIGBUS guard (CGitScan.h): a file truncated while libgit2 has it mapped
    /// fails this scan (the next one retries) instead of ending the agent.
    static func unifiedDiff(_ repository: OpaquePointer?, maxBytes: Int) throws(GitError) -> (String, Bool) {
        var bytes: UnsafeMutablePointer<CChar>?
        var length = 0
        var truncated: Int32 = 0
        let rc = agent_git_unified_diff(repository, maxBytes, &bytes, &length, &truncated)
        if rc == AGENT_GIT_FILE_CHANGED {
            GitWatchMetrics.fileChangedDuringScan.increment()
            throw GitError(call: "git diff", code: rc, message: "a working-tree file changed size during the scan")
        }
        try GitError.check(rc, "git diff")
        defer { free(bytes) }
        // Byte-exact: content that is not UTF-8 is carried as FilePathText escapes (U+10FF00
        // + byte), which a client maps back; valid UTF-8 is unchanged.
        let text = bytes.map { FilePathText.decode(Array(UnsafeRawBufferPointer(start: $0, count: length))) } ?? ""
        return (text, truncated != 0)
    }

    /// Bytes of patch text the last diff on this thread built, kept or not (tests: a file
    /// whose patch cannot fit is left out unbuilt).
    static var lastDiffBuiltBytes: Int { agent_git_last_diff_built_bytes() }
}

extension GitSnapshotter {
    /// Why `show` found nothing to return.
    public enum ShowFailure: Error, Equatable, Sendable {
        case notFound(String)
        case binary
        case tooLarge
    }

    /// Larger blobs are refused.
    public static let maxShowBytes = 512 << 10

    /// Past ``maxShowBytes`` the answer is 422 either way; only whether it says `binary file`
    /// needs the first 8 KiB. Those are streamed where libgit2 can (loose objects); a packed
    /// blob is read whole for them only up to this size, beyond it is `file too large`.
    public static let maxShowBinaryCheckBytes = 16 << 20

    /// The contents of `path` at `ref` (`git show <ref>:<path>`), as text. The blob's size
    /// is read from its header first: at most `fullReadLimit` bytes of it are ever loaded.
    public static func show(
        root: String, path: String, ref: String, fullReadLimit: Int = maxShowBinaryCheckBytes
    ) throws(ShowFailure) -> String {
        GitLibrary.ensure()
        var repository: OpaquePointer?
        guard git_repository_open(&repository, root) == 0 else { throw .notFound("cannot open \(root)") }
        defer { git_repository_free(repository) }
        var treeish: OpaquePointer?
        guard git_revparse_single(&treeish, repository, ref) == 0, let treeish else { throw .notFound(lastGitError()) }
        defer { git_object_free(treeish) }
        var tree: OpaquePointer?
        guard git_object_peel(&tree, treeish, GIT_OBJECT_TREE) == 0, let tree else { throw .notFound(lastGitError()) }
        defer { git_object_free(tree) }
        var entry: OpaquePointer?
        guard git_tree_entry_bypath(&entry, tree, path) == 0, let entry else { throw .notFound(lastGitError()) }
        defer { git_tree_entry_free(entry) }
        guard git_tree_entry_type(entry) == GIT_OBJECT_BLOB, let id = git_tree_entry_id(entry) else {
            throw .notFound("\(ref):\(path) is not a file")
        }
        var odb: OpaquePointer?
        guard git_repository_odb(&odb, repository) == 0, let odb else { throw .notFound(lastGitError()) }
        defer { git_odb_free(odb) }
        var size = 0
        var type = GIT_OBJECT_INVALID
        guard git_odb_read_header(&size, &type, odb, id) == 0 else { throw .notFound(lastGitError()) }
        if size > maxShowBytes {
            if let head = streamedHead(odb, id, count: 8192) {
                throw head.contains(0) ? .binary : .tooLarge
            }
            guard size <= fullReadLimit else { throw .tooLarge }
        }
        var blob: OpaquePointer?
        guard git_blob_lookup(&blob, repository, id) == 0, let blob else { throw .notFound(lastGitError()) }
        defer { git_blob_free(blob) }
        let loaded = Int(git_blob_rawsize(blob))
        guard let raw = git_blob_rawcontent(blob) else { return "" }
        let bytes = UnsafeRawBufferPointer(start: raw, count: loaded)
        if bytes.prefix(8192).contains(0) { throw .binary }
        guard loaded <= maxShowBytes else { throw .tooLarge }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// The first `count` bytes of an object read as a stream, nil where its backend cannot
    /// stream it (packed objects).
    private static func streamedHead(_ odb: OpaquePointer, _ id: UnsafePointer<git_oid>, count: Int) -> [UInt8]? {
        var stream: UnsafeMutablePointer<git_odb_stream>?
        var length = 0
        var type = GIT_OBJECT_INVALID
        guard git_odb_open_rstream(&stream, &length, &type, odb, id) == 0, let stream else { return nil }
        defer { git_odb_stream_free(stream) }
        var head = [UInt8](repeating: 0, count: count)
        var filled = 0
        // Bounded: each read brings at least one byte or ends the loop; at most `count` bytes.
        while filled < count {
            let got = head.withUnsafeMutableBytes { raw in
                git_odb_stream_read(stream, raw.baseAddress!.advanced(by: filled).assumingMemoryBound(to: CChar.self), count - filled)
            }
            guard got > 0 else { break }
            filled += Int(got)
        }
        return Array(head.prefix(filled))
    }

    private static func lastGitError() -> String {
        git_error_last().map { String(cString: $0.pointee.message) } ?? "not found"
    }
}
