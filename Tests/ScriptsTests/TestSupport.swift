import Foundation
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

@testable import Scripts

/// A fresh directory under the temporary directory (TMPDIR) for one test.
func temporaryDirectory() -> String {
    var template = Array((NSTemporaryDirectory() + "scripts-logs-test-XXXXXX").utf8CString)
    let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
    precondition(made != nil)
    return String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

/// Removes a directory tree without forking (a forked child would briefly hold the
/// journals' locked descriptors).
func removeTree(_ path: String) {
    if let directory = opendir(path) {
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            guard name != ".", name != ".." else { continue }
            let child = path + "/" + name
            if entry.pointee.d_type == UInt8(DT_DIR) { removeTree(child) } else { unlink(child) }
        }
        closedir(directory)
    }
    rmdir(path)
}

func readFile(_ path: String) -> [UInt8] {
    let fd = open(path, O_RDONLY)
    guard fd >= 0 else { return [] }
    defer { close(fd) }
    var result: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 65536)
    while true {
        let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        if n <= 0 { break }
        result += buffer[0..<n]
    }
    return result
}

func writeFile(_ path: String, _ bytes: [UInt8]) {
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
    precondition(fd >= 0)
    defer { close(fd) }
    _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
}

func fileMode(_ path: String) -> mode_t {
    let attributes = try? FileManager.default.attributesOfItem(atPath: path)
    let permissions = (attributes?[.posixPermissions] as? NSNumber)?.uint16Value
    precondition(permissions != nil, "no such file: \(path)")
    return mode_t(permissions! & 0o777)
}

private let processStart = ContinuousClock.now

func nowNanoseconds() -> UInt64 {
    let start = processStart
    let elapsed = ContinuousClock.now - start
    let (seconds, attoseconds) = elapsed.components
    return UInt64(seconds) * 1_000_000_000 + UInt64(attoseconds / 1_000_000_000)
}

private final class ThreadBody: Sendable {
    let run: @Sendable () -> Void
    init(_ run: @escaping @Sendable () -> Void) { self.run = run }
}

/// Runs `body(i)` on `count` real threads and waits for them.
func onThreads(_ count: Int, _ body: @escaping @Sendable (Int) -> Void) {
    var threads: [pthread_t] = []
    for index in 0..<count {
        let box = Unmanaged.passRetained(ThreadBody { body(index) })
        var thread = pthread_t()
        let result = pthread_create(
            &thread, nil,
            { argument in
                Unmanaged<ThreadBody>.fromOpaque(argument!).takeRetainedValue().run()
                return nil
            }, box.toOpaque())
        precondition(result == 0)
        threads.append(thread)
    }
    for thread in threads { pthread_join(thread, nil) }
}

func bytes(_ string: String) -> [UInt8] { Array(string.utf8) }
