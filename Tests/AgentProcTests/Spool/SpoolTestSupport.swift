import Glibc
import AgentCore
@testable import AgentProc

/// Expected byte at logical offset `o` (not periodic: depends on all bits of `o`).
func pattern(_ o: UInt64) -> UInt8 {
    let x = o &* 0x9E37_79B9_7F4A_7C15
    return UInt8(truncatingIfNeeded: (x >> 56) ^ (x >> 29))
}

func patternBytes(from: UInt64, count: Int) -> [UInt8] {
    [UInt8](unsafeUninitializedCapacity: count) { buf, n in
        for i in 0..<count { buf[i] = pattern(from + UInt64(i)) }
        n = count
    }
}

func matchesPattern(_ r: SpoolRead) -> Bool {
    var o = r.offset
    for b in r.bytes {
        if b != pattern(o) { return false }
        o += 1
    }
    return true
}

/// A temporary directory under /tmp, removed by `cleanup()`.
struct TempDir {
    let path: String
    init() {
        var template = Array("/tmp/spooltest-XXXXXX".utf8CString)
        let p = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        precondition(p != nil)
        path = String(cString: p!)
    }
    func cleanup() { removeTree(path) }
}

func removeTree(_ path: String) {
    guard let st = Posix.lstatInfo(path) else { return }
    if Posix.isDirectory(st) {
        for name in Posix.listDirectory(path) { removeTree(path + "/" + name) }
        rmdir(path)
    } else {
        unlink(path)
    }
}

/// Sum of (st_size, st_blocks*512) over segment-named regular files below `path`.
func segmentDiskUsage(_ path: String) -> (size: Int, blocks: Int, files: Int) {
    var size = 0, blocks = 0, files = 0
    for name in Posix.listDirectory(path) {
        let p = path + "/" + name
        guard let st = Posix.lstatInfo(p) else { continue }
        if Posix.isDirectory(st) {
            let sub = segmentDiskUsage(p)
            size += sub.size; blocks += sub.blocks; files += sub.files
        } else if Posix.isRegular(st), Posix.parseSegmentName(name) != nil {
            size += st.size; blocks += st.allocatedBytes; files += 1
        }
    }
    return (size, blocks, files)
}

/// A store of 4 KiB segments (1 MiB per spool, 4 MiB in all) in `tmp`'s `store` directory.
func smallStore(in tmp: TempDir) throws -> OutputSpoolStore {
    try OutputSpoolStore(
        directory: tmp.path + "/store",
        limits: .init(segmentBytes: 4096, maxBytesPerSpool: 1 << 20, maxTotalBytes: 4 << 20))
}

func fileSize(_ path: String) -> Int? { Posix.lstatInfo(path).map { $0.size } }

func writeFile(_ path: String, _ bytes: [UInt8]) {
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
    precondition(fd >= 0)
    _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    close(fd)
}

/// Appends pattern bytes `[spool.end, +count)` in chunks of `chunk`.
func appendPattern(_ spool: OutputSpool, count: Int, chunk: Int) {
    var left = count
    while left > 0 {
        let n = min(chunk, left)
        spool.append(patternBytes(from: spool.end, count: n))
        left -= n
    }
}

/// Reads everything from `from` to the end with reads of `limit`; returns (offset of first byte, bytes).
func readAll(_ spool: OutputSpool, from: UInt64 = 0, limit: Int = 1 << 20) -> (UInt64, [UInt8]) {
    var out: [UInt8] = []
    var first: UInt64? = nil
    var at = from
    while true {
        let r = spool.read(from: at, limit: limit)
        if first == nil { first = r.offset }
        if r.bytes.isEmpty { break }
        precondition(r.offset == at || out.isEmpty)
        out += r.bytes
        at = r.next
    }
    return (first ?? from, out)
}

/// Runs `body` on a new pthread; `join()` waits for it.
final class TestThread: Sendable {
    private let thread: pthread_t
    init(_ body: @escaping @Sendable () -> Void) {
        final class Box: Sendable {
            let body: @Sendable () -> Void
            init(_ body: @escaping @Sendable () -> Void) { self.body = body }
        }
        let arg = Unmanaged.passRetained(Box(body)).toOpaque()
        var t = pthread_t()
        let rc = pthread_create(
            &t, nil,
            { raw in
                let box = Unmanaged<Box>.fromOpaque(raw!).takeRetainedValue()
                box.body()
                return nil
            }, arg)
        precondition(rc == 0)
        thread = t
    }
    func join() { pthread_join(thread, nil) }
}

/// xorshift64* for reproducible random test ranges.
struct TestRNG {
    var state: UInt64
    mutating func next() -> UInt64 {
        state ^= state >> 12; state ^= state << 25; state ^= state >> 27
        return state &* 2_685_821_657_736_338_717
    }
    mutating func below(_ n: UInt64) -> UInt64 { n == 0 ? 0 : next() % n }
}
