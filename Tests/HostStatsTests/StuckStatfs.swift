import Dispatch
@testable import HostStats
import Synchronization

/// A `statfs` whose calls for one path block their thread until the test releases them, as
/// `statfs` blocks on a dead hard-mounted NFS server; every call is counted. Any path
/// answers a 4 MB disk, 70 % used (once released, the stuck path too).
final class StuckStatfs: Sendable {
    private struct State {
        var released = false
        var calls: [String: Int] = [:]
        var blocked = 0
    }

    let path: String
    private let state = Mutex(State())
    private let gate = DispatchSemaphore(value: 0)

    init(_ path: String) {
        self.path = path
    }

    /// Calls made for `path`.
    func calls(_ path: String) -> Int { state.withLock { $0.calls[path, default: 0] } }

    /// Calls blocked now.
    var blocked: Int { state.withLock { $0.blocked } }

    func statfs(_ path: String) -> Result<DiskUsage, DiskError> {
        let wait = state.withLock { s -> Bool in
            s.calls[path, default: 0] += 1
            guard path == self.path, !s.released else { return false }
            s.blocked += 1
            return true
        }
        if wait {
            gate.wait()
            state.withLock { $0.blocked -= 1 }
        }
        return .success(DiskUsage(blocks: 1000, freeBlocks: 300, blockSize: 4096))
    }

    /// Lets the blocked calls return, and later ones answer at once.
    func release() {
        let blocked = state.withLock { s -> Int in
            s.released = true
            return s.blocked
        }
        for _ in 0..<blocked { gate.signal() }
    }
}
