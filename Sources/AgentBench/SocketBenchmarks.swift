import AgentCore
import AgentRPC
import AgentSocket
import ArgumentParser
import DRPC
import Foundation
import Logging
import ServiceLifecycle

#if canImport(Glibc)
import Glibc
#endif

/// `agent-bench socket`: the agent socket's Ping round trip against a raw unix-socket echo
/// round trip (same client code, same payload direction), and how soon a waiting `start`
/// wakes after its dependency completes against the reference's 1 s polling.
struct SocketBenchmarks: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "socket", abstract: "Agent socket: Ping RTT and start wake-up.")

    @Option(help: "Round trips per side and round.") var calls = 2000
    @Option(help: "Wake-ups measured.") var wakes = 20

    func run() async throws {
        let directory = NSTemporaryDirectory() + "agent-bench-socket-\(getpid())"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/agent.sock"
        let quiet = Logger(label: "bench", factory: { _ in SwiftLogNoOpLogHandler() })
        let upward = ControlPlaneSession(configuration: .init(agentVersion: "0.1.0"), dialer: nil, logger: quiet)
        let server = AgentSocketServer(
            configuration: .init(path: path), service: AgentSocketService(units: UnitManager(), upward: upward), logger: quiet)
        let group = ServiceGroup(configuration: .init(services: [server], logger: quiet))
        let echoPath = directory + "/echo.sock"
        let echo = try EchoServer(path: echoPath)

        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            for _ in 0..<500 where !server.isListening { try await Task.sleep(for: .milliseconds(10)) }
            print("agent-bench socket: 3 rounds of \(calls) round trips per side (medians), \(wakes) wake-ups")
            var agentRTT: [Double] = []
            var echoRTT: [Double] = []
            for _ in 0..<3 {
                agentRTT.append(await Self.pingRoundTrips(path: path, calls: calls))
                echoRTT.append(await Self.echoRoundTrips(path: echoPath, calls: calls))
            }
            let agent = Bench.median(agentRTT)
            let baseline = Bench.median(echoRTT)
            report(
                "Ping round trip (median)", value: Bench.format(agent), baseline: Bench.format(baseline), ratio: agent / baseline,
                goal: "<= 2x raw unix-socket echo", met: agent / baseline <= 2)

            let client = AgentSocketClient(path: path)
            var wakeups: [Double] = []
            for index in 0..<wakes {
                let unit = "unit-\(index)"
                let dependency = "dependency-\(index)"
                try await client.syncWant(unit, dependsOn: dependency)
                try await client.syncStart(dependency)
                let waiting = Task { () -> UInt64 in
                    try await client.waitReady(unit)
                    return Bench.now()
                }
                try await Task.sleep(for: .milliseconds(20))
                let completed = Bench.now()
                try await client.syncComplete(dependency)
                let woke = try await waiting.value
                wakeups.append(Double(woke - completed))
            }
            let wake = Bench.median(wakeups)
            let poll = 1e9
            report(
                "start wake-up after complete (median)", value: Bench.format(wake), baseline: Bench.format(poll),
                ratio: wake / poll, goal: "< 50 ms (baseline: the reference's 1 s poll)", met: wake < 50e6)
            await group.triggerGracefulShutdown()
            try await tasks.next()
        }
        echo.stop()
    }

    /// Mean ns per Ping on one connection, stream IDs rising as dRPC requires.
    static func pingRoundTrips(path: String, calls: Int) async -> Double {
        await onThread {
            guard let fd = Self.connect(path) else { return .nan }
            defer { close(fd) }
            var buffer = [UInt8](repeating: 0, count: 4096)
            let method = Array("/coder.agentsocket.v1.AgentSocket/Ping".utf8)
            let start = Bench.now()
            for index in 1...calls {
                let stream = Self.varint(index)
                var request: [UInt8] = [0x03] + stream + [0x01] + Self.varint(method.count) + method
                request += [0x05] + stream + [0x02, 0x00] + [0x0D] + stream + [0x03, 0x00]
                guard Bench.sendAll(fd, request) else { return .nan }
                // The answer: Message (empty) and CloseSend.
                let expected = 2 * (3 + stream.count)
                var got = 0
                while got < expected {
                    let n = recv(fd, &buffer, buffer.count, 0)
                    if n <= 0 { return .nan }
                    got += n
                }
            }
            return Double(Bench.now() - start) / Double(calls)
        }
    }

    /// Mean ns per echo of a Ping-sized request and a Ping-sized answer.
    static func echoRoundTrips(path: String, calls: Int) async -> Double {
        await onThread {
            guard let fd = Self.connect(path) else { return .nan }
            defer { close(fd) }
            var buffer = [UInt8](repeating: 0, count: 4096)
            let request = [UInt8](repeating: 7, count: 50)
            let start = Bench.now()
            for _ in 0..<calls {
                guard Bench.sendAll(fd, request) else { return .nan }
                var got = 0
                while got < request.count {
                    let n = recv(fd, &buffer, buffer.count, 0)
                    if n <= 0 { return .nan }
                    got += n
                }
            }
            return Double(Bench.now() - start) / Double(calls)
        }
    }

    static func connect(_ path: String) -> Int32? {
        try? UnixSocket.connect(path).get()
    }

    static func varint(_ value: Int) -> [UInt8] { Varint.encoded(UInt64(value)) }
}

/// The baseline: a unix-socket echo server on its own thread (blocking accept, read, write).
final class EchoServer: Sendable {
    private let listener: Int32

    /// `discard`: read and drop instead of echoing (a sink).
    init(path: String, discard: Bool = false) throws {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        let bound = UnixSocket.withAddress(path) { bind(fd, $0, $1) } ?? -1
        guard fd >= 0, bound == 0, listen(fd, 16) == 0 else { throw ValidationError("cannot listen on \(path)") }
        listener = fd
        let thread = Thread { [fd] in
            while true {
                let client = accept(fd, nil, nil)
                if client < 0 { return }
                let worker = Thread {
                    var buffer = [UInt8](repeating: 0, count: 65536)
                    while true {
                        let n = recv(client, &buffer, buffer.count, 0)
                        if n <= 0 { break }
                        if !discard, !Bench.sendAll(client, Array(buffer[0..<n])) { break }
                    }
                    close(client)
                }
                worker.start()
            }
        }
        thread.start()
    }

    func stop() {
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
    }
}

/// Runs blocking work on its own thread, off Swift's cooperative pool.
func onThread<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { continuation in
        let thread = Thread { continuation.resume(returning: body()) }
        thread.start()
    }
}
