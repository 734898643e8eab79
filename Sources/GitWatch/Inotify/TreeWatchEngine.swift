import AgentCore
import CoreMetrics
import Glibc
import Logging

/// The thread-confined half of ``TreeWatcher``: the inotify instance, which directory each
/// watch descriptor is and which repositories it belongs to, and a libgit2 handle per
/// repository for `.gitignore` questions. Everything here runs on the watcher's one thread.
///
/// What is watched per repository: every directory of the working tree that is not ignored,
/// not a symlink and not inside a nested repository; its git directory (HEAD, index) and
/// the common one (packed-refs, config); and the common `refs/heads` tree (commits move a
/// branch). Memory: at most `maxWatches` directories in all, one path each.
final class TreeWatchEngine {
    enum Kind { case tree, git }

    struct Directory {
        var path: String
        var roots: [String: Kind]
    }

    struct Root {
        var matcher: IgnoreMatcher?
        var descriptors: Set<Int32> = []
        /// Every directory is watched, so no event since a scan means no change.
        var live = false
        /// Its fall back to polling was logged.
        var announced = false
        /// It is polled because the budget ran out (another try when budget frees up).
        var overBudget = false
        /// Watches it held when the budget ran out, plus one: it is tried again only once at
        /// least that many are free, not on every release of a smaller repository.
        var neededWatches = 0
    }

    private let inotify: Inotify?
    private let maxWatches: Int
    private let logger: Logger
    private var directories: [Int32: Directory] = [:]
    private var byPath: [String: Int32] = [:]
    private var roots: [String: Root] = [:]

    init(maxWatches: Int, logger: Logger) {
        self.maxWatches = maxWatches
        self.logger = logger
        do {
            inotify = try Inotify()
        } catch {
            logger.warning("inotify is unavailable; repositories are polled", metadata: ["error": "\(error)"])
            inotify = nil
        }
    }

    /// The descriptor to poll for events, or -1 without inotify.
    var descriptor: Int32 { inotify?.descriptor ?? -1 }
    var watchCount: Int { directories.count }
    var polledCount: Int { roots.values.filter { !$0.live }.count }

    var rootNames: [String] { Array(roots.keys) }

    func isLive(_ root: String) -> Bool { roots[root]?.live ?? false }

    /// Free watches a repository over the budget waits for before it is tried again (tests).
    func neededWatches(_ root: String) -> Int? { roots[root]?.neededWatches }

    /// Starts watching `root`; it is live unless inotify is missing or the budget ran out.
    func add(root: String) {
        guard roots[root] == nil else { return }
        roots[root] = Root(matcher: inotify == nil ? nil : IgnoreMatcher(root: root))
        build(root)
    }

    func remove(root: String) {
        guard roots[root] != nil else { return }
        release(root)
        roots[root] = nil
        // Freed budget: repositories that did not fit get another try once it covers what
        // each held when it ran out (a walk of up to the whole budget per try).
        for (other, entry) in roots where !entry.live && entry.matcher != nil && entry.overBudget {
            guard maxWatches - watchCount >= entry.neededWatches else { continue }
            build(other)
        }
    }

    /// Reads every queued event (bounded per call); returns the repositories they touch.
    func drain() -> Set<String> {
        guard let inotify else { return [] }
        var touched: Set<String> = []
        var rebuild: Set<String> = []
        var seen: Set<String> = []
        for _ in 0..<64 {
            let events = inotify.read()
            if events.isEmpty { break }
            for event in events { handle(event, touched: &touched, rebuild: &rebuild, seen: &seen) }
        }
        for root in rebuild where roots[root] != nil {
            release(root)
            roots[root]?.matcher = IgnoreMatcher(root: root)
            build(root)
        }
        return touched
    }

    private func handle(_ event: Inotify.Event, touched: inout Set<String>, rebuild: inout Set<String>, seen: inout Set<String>) {
        if event.has(IN_Q_OVERFLOW) {
            // Events were lost: every repository may have changed, and new directories may be unwatched.
            GitWatchMetrics.overflows.increment()
            touched.formUnion(roots.keys)
            rebuild.formUnion(roots.keys)
            return
        }
        guard let directory = directories[event.descriptor] else { return }
        if event.has(IN_IGNORED) {
            // The kernel dropped the watch (the directory is gone).
            forget(event.descriptor)
            touched.formUnion(directory.roots.keys)
            return
        }
        let isDirectory = event.has(IN_ISDIR)
        // A file written many times in one batch is looked at once.
        if !isDirectory, !seen.insert("\(event.descriptor)/\(event.name)").inserted { return }
        for (root, kind) in directory.roots {
            guard let entry = roots[root], entry.live else { continue }
            if event.lossy {
                // A name that is not UTF-8 cannot be watched by path: poll this repository.
                touched.insert(root)
                degrade(root, reason: "a file name is not UTF-8")
                continue
            }
            if event.name.isEmpty {
                touched.insert(root)
                if event.has(IN_MOVE_SELF) { rebuild.insert(root) }
                continue
            }
            let path = directory.path + "/" + event.name
            switch kind {
            case .git:
                if event.name.hasSuffix(".lock") { continue }
                if let matcher = entry.matcher, directory.path == matcher.commonDirectory + "/info" {
                    // info/exclude: the ignore rules changed.
                    rebuild.insert(root)
                } else if isDirectory, event.has(IN_CREATE) || event.has(IN_MOVED_TO), let matcher = entry.matcher,
                    path.hasPrefix(matcher.commonDirectory + "/refs/")
                {
                    if !watchTree(path, root: root, kind: .git) { degrade(root, reason: "over the inotify budget") }
                }
                touched.insert(root)
            case .tree:
                if event.name == ".gitignore" || event.name == ".gitmodules" {
                    rebuild.insert(root)
                    touched.insert(root)
                    continue
                }
                if event.name == ".git" {
                    // A repository appearing below (a clone in progress) is its own root: rewatch.
                    if directory.path != root { rebuild.insert(root) }
                    touched.insert(root)
                    continue
                }
                let relative = String(path.dropFirst(root.count + 1))
                if isDirectory {
                    if entry.matcher?.isInvisible(relative + "/") == true { continue }
                    if event.has(IN_MOVED_FROM) {
                        // Watches below it now have stale paths.
                        rebuild.insert(root)
                        touched.insert(root)
                        continue
                    }
                    if event.has(IN_CREATE) || event.has(IN_MOVED_TO), !DirectoryWalk.exists(path + "/.git") {
                        if !watchTree(path, root: root, kind: .tree) { degrade(root, reason: "over the inotify budget") }
                    }
                    touched.insert(root)
                } else {
                    if entry.matcher?.isInvisible(relative) == true { continue }
                    touched.insert(root)
                }
            }
        }
    }

    /// Watches everything `root` needs; on running out of budget, watches none of it.
    /// Walks made to watch a repository (tests).
    private(set) var builds = 0

    private func build(_ root: String) {
        builds += 1
        guard let matcher = roots[root]?.matcher else {
            roots[root]?.live = false
            return
        }
        // Submodules change the diff from inside their own trees and git directories, which
        // are not watched: such a repository is polled (fingerprint) instead.
        if DirectoryWalk.exists(root + "/.gitmodules") {
            degrade(root, reason: "it has submodules")
            return
        }
        roots[root]?.live = true
        let common = matcher.commonDirectory
        let ok =
            watch(matcher.gitDirectory, root: root, kind: .git)
            && (common == matcher.gitDirectory || watch(common, root: root, kind: .git))
            && (!DirectoryWalk.isDirectory(common + "/info") || watch(common + "/info", root: root, kind: .git))
            && (!DirectoryWalk.isDirectory(common + "/refs/heads") || watchTree(common + "/refs/heads", root: root, kind: .git))
        if !ok {
            degrade(root, reason: "over the inotify budget")
        } else if !watchTree(root, root: root, kind: .tree) {
            degrade(root, reason: watchCount >= maxWatches ? "over the inotify budget" : "a file name is not UTF-8")
        }
    }

    /// Watches `top` and the directories below it that belong to `root`'s tree.
    private func watchTree(_ top: String, root: String, kind: Kind) -> Bool {
        var pending = [top]
        while let directory = pending.popLast() {
            guard watch(directory, root: root, kind: kind) else { return false }
            guard let names = DirectoryWalk.subdirectories(of: directory) else {
                // Unreadable (gone, no permission): nothing to watch there. Not UTF-8: polled.
                if DirectoryWalk.isDirectory(directory) && access(directory, R_OK) == 0 { return false }
                continue
            }
            for name in names where name != ".git" {
                let path = directory + "/" + name
                if kind == .tree {
                    // A nested repository is its own root; ignored, untracked trees are not shown.
                    if DirectoryWalk.exists(path + "/.git") { continue }
                    if roots[root]?.matcher?.isInvisible(String(path.dropFirst(root.count + 1)) + "/") == true { continue }
                }
                pending.append(path)
            }
        }
        return true
    }

    /// Adds one directory; false when the budget or the kernel's limit is reached.
    private func watch(_ path: String, root: String, kind: Kind) -> Bool {
        guard let inotify else { return false }
        if let wd = byPath[path], directories[wd] != nil {
            directories[wd]?.roots[root] = kind
            roots[root]?.descriptors.insert(wd)
            return true
        }
        guard directories.count < maxWatches else { return false }
        switch inotify.add(path) {
        case .success(let wd):
            if let old = directories[wd]?.path, old != path { byPath[old] = nil }
            directories[wd, default: Directory(path: path, roots: [:])].path = path
            directories[wd]?.roots[root] = kind
            byPath[path] = wd
            roots[root]?.descriptors.insert(wd)
            return true
        case .failure(let error) where error.errno == ENOSPC || error.errno == ENOMEM:
            return false
        case .failure:
            // Gone already, or unreadable: nothing to watch there.
            return true
        }
    }

    /// Stops watching `root`'s directories (those no other repository shares).
    private func release(_ root: String) {
        for wd in roots[root]?.descriptors ?? [] {
            directories[wd]?.roots[root] = nil
            if let directory = directories[wd], directory.roots.isEmpty {
                inotify?.remove(wd)
                directories[wd] = nil
                byPath[directory.path] = nil
            }
        }
        roots[root]?.descriptors = []
    }

    /// Stops watching `root`: it is polled with the fingerprint. Logged once per repository.
    private func degrade(_ root: String, reason: String) {
        // What a rebuild needs anew: the directories no other repository shares (a linked
        // worktree shares its main repository's git directory and refs).
        let held = roots[root]?.descriptors.filter { directories[$0]?.roots.count == 1 }.count ?? 0
        release(root)
        roots[root]?.overBudget = reason == "over the inotify budget"
        roots[root]?.neededWatches = held + 1
        if roots[root]?.announced == false {
            roots[root]?.announced = true
            logger.notice(
                "repository is polled instead of watched", metadata: ["repo_root": "\(root)", "reason": "\(reason)", "max_watches": "\(maxWatches)"])
        }
        roots[root]?.live = false
    }

    private func forget(_ wd: Int32) {
        guard let directory = directories.removeValue(forKey: wd) else { return }
        byPath[directory.path] = nil
        for root in directory.roots.keys { roots[root]?.descriptors.remove(wd) }
    }
}
