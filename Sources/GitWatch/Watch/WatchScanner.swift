import Foundation
import Logging
import NIOPosix

/// One socket's scanning state: the watched roots and the snapshot last sent for each
/// (spec git-watch §3). Scans run on NIO's thread pool, one repository at a time.
actor WatchScanner {
    private var roots: Set<String> = []
    private var sent: [String: RepositorySnapshot] = [:]
    /// The last failure logged per root, so a repository that stays broken logs once.
    private var failures: [String: String] = [:]
    private let logger = Logger(label: "workspace-agent.git")

    /// Adds the roots the chat's paths lead to.
    func resolve(_ paths: [String]) async {
        let found = (try? await NIOThreadPool.singleton.runIfActive { RepositoryFinder.roots(for: paths) }) ?? []
        roots.formUnion(found)
    }

    var isWatching: Bool { !roots.isEmpty }

    /// Scans every root; returns the entries that changed since last sent (a removed
    /// repository once, then it leaves the set), or nil when nothing is watched.
    func scan() async -> [RepositoryEntry]? {
        guard !roots.isEmpty else { return nil }
        var changed: [RepositoryEntry] = []
        for root in roots.sorted() {
            let result = try? await NIOThreadPool.singleton.runIfActive { () -> Result<RepositorySnapshot, GitError>? in
                guard FileManager.default.fileExists(atPath: root + "/.git") else { return nil }
                return Result { () throws(GitError) in try GitSnapshotter.snapshot(root: root) }
            }
            if case .failure(let error)? = result, failures[root] != error.description {
                // A corrupt HEAD, a lock held by git: kept and tried again next scan.
                failures[root] = error.description
                logger.warning("cannot read repository; it stays watched", metadata: ["repo_root": "\(root)", "error": "\(error)"])
            }
            guard case .success(let snapshot)? = result else {
                if !FileManager.default.fileExists(atPath: root + "/.git") {
                    roots.remove(root)
                    sent[root] = nil
                    changed.append(RepositoryEntry(removed: root))
                }
                // Otherwise (a corrupt HEAD, a lock): kept, tried again next scan.
                continue
            }
            failures[root] = nil
            if sent[root] != snapshot {
                sent[root] = snapshot
                changed.append(RepositoryEntry(snapshot))
            }
        }
        return changed
    }
}
