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
        // Freed budget: repositories that did not fit get another try.
        for (other, entry) in roots where !entry.live && entry.matcher != nil { build(other) }
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
            if event.name.isEmpty {
                touched.insert(root)
                if event.has(IN_MOVE_SELF) { rebuild.insert(root) }
                continue
            }
            let path = directory.path + "/" + event.name
            switch kind {
            case .git:
                if event.name.hasSuffix(".lock") { continue }
                if isDirectory, event.has(IN_CREATE) || event.has(IN_MOVED_TO), let matcher = entry.matcher,
                   path.hasPrefix(matcher.commonDirectory + "/refs/") {
                    if !watchTree(path, root: root, kind: .git) { degrade(root) }
                }
                touched.insert(root)
            case .tree:
                if event.name == ".gitignore" {
                    rebuild.insert(root)
                    touched.insert(root)
                    continue
                }
                if event.name == ".git" {
                    touched.insert(root)
                    continue
                }
                let relative = String(path.dropFirst(root.count + 1))
                if isDirectory {
                    if event.has(IN_MOVED_FROM) {
                        // Watches below it now have stale paths.
                        rebuild.insert(root)
                        touched.insert(root)
                        continue
                    }
                    if entry.matcher?.isIgnored(relative + "/") == true { continue }
                    if event.has(IN_CREATE) || event.has(IN_MOVED_TO), !DirectoryWalk.exists(path + "/.git") {
                        if !watchTree(path, root: root, kind: .tree) { degrade(root) }
                    }
                    touched.insert(root)
                } else {
                    if entry.matcher?.isIgnored(relative) == true { continue }
                    touched.insert(root)
                }
            }
        }
    }

    /// Watches everything `root` needs; on running out of budget, watches none of it.
    private func build(_ root: String) {
        guard let matcher = roots[root]?.matcher else {
            roots[root]?.live = false
            return
        }
        roots[root]?.live = true
        let ok = watch(matcher.gitDirectory, root: root, kind: .git)
            && (matcher.commonDirectory == matcher.gitDirectory || watch(matcher.commonDirectory, root: root, kind: .git))
            && (!DirectoryWalk.isDirectory(matcher.commonDirectory + "/refs/heads")
                || watchTree(matcher.commonDirectory + "/refs/heads", root: root, kind: .git))
            && watchTree(root, root: root, kind: .tree)
        if !ok { degrade(root) }
    }

    /// Watches `top` and the directories below it that belong to `root`'s tree.
    private func watchTree(_ top: String, root: String, kind: Kind) -> Bool {
        var pending = [top]
        while let directory = pending.popLast() {
            guard watch(directory, root: root, kind: kind) else { return false }
            for name in DirectoryWalk.subdirectories(of: directory) ?? [] where name != ".git" {
                let path = directory + "/" + name
                if kind == .tree {
                    // A nested repository or submodule is its own root; ignored trees are not shown.
                    if DirectoryWalk.exists(path + "/.git") { continue }
                    if roots[root]?.matcher?.isIgnored(String(path.dropFirst(root.count + 1)) + "/") == true { continue }
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

    private func degrade(_ root: String) {
        release(root)
        if roots[root]?.live == true {
            logger.notice(
                "repository has more directories than the inotify budget; it is polled",
                metadata: ["repo_root": "\(root)", "max_watches": "\(maxWatches)"])
        }
        roots[root]?.live = false
    }

    private func forget(_ wd: Int32) {
        guard let directory = directories.removeValue(forKey: wd) else { return }
        byPath[directory.path] = nil
        for root in directory.roots.keys { roots[root]?.descriptors.remove(wd) }
    }
}
