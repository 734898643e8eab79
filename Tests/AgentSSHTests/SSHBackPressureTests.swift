import AgentTestSupport
import Foundation
import NIOCore
import Testing

@testable import AgentSSH

/// A client that grants a 4 GiB window and then reads nothing: the agent stops reading the
/// process once its connection cannot take more, so the process waits on its pipe. Before,
/// child channels followed the window alone and the agent queued all the output (1.76 GB in
/// 24 s from `cat /dev/zero`, not given back).
@Suite(.serialized, .timeLimit(.minutes(3)))
struct SSHBackPressureTests {
    @Test func aHugeWindowDoesNotOutrunTheConnection() async throws {
        let server = try await SSHSessionTests.Server()
        defer { Task { await server.stop() } }
        let client = try await SSHTestClient.connect(port: server.port, hugeWindow: true)
        defer { Task { await client.close() } }
        let session = try await client.open()
        let count = 4000 + Int.random(in: 1...90)
        let marker = NSTemporaryDirectory() + "ssh-backpressure-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: marker) }
        // 256 MiB: far past any socket's buffers.
        session.exec("dd if=/dev/zero bs=64k count=\(count) status=none; touch \(marker)")
        try await client.channel.setOption(ChannelOptions.autoRead, value: false).get()
        // Wait (bounded) until dd is done, or waits on its pipe having written nothing more
        // for a second (it blocks for a moment at its start, before the agent reads).
        var written: Int?
        var last: (bytes: Int, at: ContinuousClock.Instant)?
        let settled = await eventually(timeout: .seconds(120)) {
            if FileManager.default.fileExists(atPath: marker) { return true }
            guard let pid = Self.pid(of: "dd if=/dev/zero bs=64k count=\(count)"), let bytes = Self.bytesWritten(pid) else { return false }
            let wchan = (try? String(contentsOfFile: "/proc/\(pid)/wchan", encoding: .utf8)) ?? ""
            // `pipe_write`, or `anon_pipe_write` on newer kernels.
            guard wchan.hasSuffix("pipe_write") || wchan.contains("pipe_wait") else {
                last = nil
                return false
            }
            guard let seen = last, seen.bytes == bytes else {
                last = (bytes, .now)
                return false
            }
            guard ContinuousClock.now - seen.at >= .seconds(1) else { return false }
            written = bytes
            return true
        }
        #expect(settled)
        #expect(!FileManager.default.fileExists(atPath: marker), "dd wrote its 256 MiB: the agent read it all")
        #expect((written ?? .max) < 64 << 20, "\(written ?? -1) bytes taken from the process")
    }

    /// The pid of the process whose command line starts with `text` (not the shell that
    /// runs it, whose own holds it further on).
    static func pid(of text: String) -> Int32? {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        for entry in entries {
            guard let pid = Int32(entry), let line = try? Data(contentsOf: URL(fileURLWithPath: "/proc/\(entry)/cmdline")) else { continue }
            if String(decoding: line.map { $0 == 0 ? 0x20 : $0 }, as: UTF8.self).hasPrefix(text) { return pid }
        }
        return nil
    }

    /// `wchar` of /proc/`pid`/io.
    static func bytesWritten(_ pid: Int32) -> Int? {
        let io = (try? String(contentsOfFile: "/proc/\(pid)/io", encoding: .utf8)) ?? ""
        return io.split(separator: "\n").first { $0.hasPrefix("wchar:") }.flatMap { Int($0.dropFirst(6).trimmingCharacters(in: .whitespaces)) }
    }
}
