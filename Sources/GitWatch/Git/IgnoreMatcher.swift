import CGit2

/// A repository opened to answer `.gitignore` questions and to name its git directories.
/// Not Sendable: it belongs to the one thread that made it (libgit2 handles are never
/// shared across threads).
final class IgnoreMatcher {
    private let repository: OpaquePointer
    /// The working tree's root, no trailing slash.
    let workdir: String
    /// The repository's own git directory (`.git`, or `.git/worktrees/<name>` for a linked
    /// worktree) and the common one that holds refs, no trailing slashes.
    let gitDirectory: String
    let commonDirectory: String

    init?(root: String) {
        GitLibrary.ensure()
        var handle: OpaquePointer?
        guard git_repository_open(&handle, root) == 0, let handle else { return nil }
        guard let workdir = git_repository_workdir(handle) else {
            git_repository_free(handle)
            return nil
        }
        func trimmed(_ pointer: UnsafePointer<CChar>) -> String {
            let text = String(cString: pointer)
            return text.count > 1 && text.hasSuffix("/") ? String(text.dropLast()) : text
        }
        repository = handle
        self.workdir = trimmed(workdir)
        gitDirectory = trimmed(git_repository_path(handle))
        commonDirectory = git_repository_commondir(handle).map(trimmed) ?? trimmed(git_repository_path(handle))
    }

    deinit {
        git_index_free(index)
        git_repository_free(repository)
    }

    /// The repository's index, read again when it changed on disk.
    private var index: OpaquePointer?

    /// Whether the index tracks `relative` (a file), or anything below it (a directory
    /// ending in "/"): a tracked file stays in the diff even where an ignore rule matches.
    func isTracked(_ relative: String) -> Bool {
        if index == nil, git_repository_index(&index, repository) != 0 { return false }
        git_index_read(index, 0)
        if relative.hasSuffix("/") {
            var position = 0
            return git_index_find_prefix(&position, index, relative) == 0
        }
        return git_index_get_bypath(index, relative, 0) != nil
    }

    /// Ignored and not tracked: nothing there can change the diff.
    func isInvisible(_ relative: String) -> Bool {
        isIgnored(relative) && !isTracked(relative)
    }

    /// Whether `relative` (to the working tree; a directory may end in "/") is ignored,
    /// by itself or through a parent directory.
    func isIgnored(_ relative: String) -> Bool {
        var ignored: Int32 = 0
        return git_ignore_path_is_ignored(&ignored, repository, relative) == 0 && ignored == 1
    }
}
