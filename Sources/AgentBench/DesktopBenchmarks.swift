import ArgumentParser
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// `agent-bench desktop`: the release agent's VNC bridge against websockify (Debian) and a
/// plain TCP relay, all in front of the agent's own Xvnc in the same run: throughput of full
/// raw 1920×1080 framebuffer updates and the round trip of a 1×1 update; and a 1920×1080
/// screenshot action against `ffmpeg -f x11grab -frames:v 1` on the same display.
struct DesktopBenchmarks: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "desktop", abstract: "Desktop: VNC bridge throughput and latency, screenshots.")

    @Option(help: "Path of the workspace-agent binary (default: next to agent-bench).")
    var agent: String?
    @Option(help: "Full-screen updates per side and round.") var updates = 30
    @Option(help: "1x1 update round trips per side and round.") var roundTrips = 300
    @Option(help: "Screenshots per side.") var screenshots = 10

    func run() throws {
        let binary = try Bench.agentBinary(agent)
        for tool in ["websockify", "ffmpeg", "xsetroot"] where Bench.onPath(tool) == nil {
            throw ValidationError("\(tool) not found: `make bench` installs websockify, ffmpeg and x11-xserver-utils")
        }
        let benchmarks = ProcessBenchmarks()
        let port = Bench.freePort()
        let daemon = benchmarks.launch(binary, port: port)
        defer { benchmarks.stop(daemon) }
        guard let client = benchmarks.connectWhenHealthy(port: port) else { throw ValidationError("agent did not answer /healthz") }
        guard client.request("POST", "/api/v0/desktop/action", body: #"{"action":"cursor_position"}"#)?.0 == 200,
            let (vncPort, display) = DesktopBench.xvnc(under: daemon)
        else { throw ValidationError("the agent's desktop did not start (is Xvnc installed?)") }
        // Something that is not flat colour on the screen.
        _ = Bench.wait(Bench.spawn(["/usr/bin/env", "DISPLAY=:\(display)", "xsetroot", "-mod", "7", "5", "-fg", "#3050a0", "-bg", "#e0d0b0"]))
        print("agent-bench desktop: Xvnc :\(display) 1920x1080; \(updates) full updates and \(roundTrips) round trips per side, 3 rounds (medians)")

        let relay = try TCPRelay(target: vncPort)
        defer { relay.stop() }
        let websockifyPort = Bench.freePort()
        let websockify = Bench.spawn(
            ["/usr/bin/env", "websockify", "127.0.0.1:\(websockifyPort)", "127.0.0.1:\(vncPort)"], stdoutPath: "/dev/null")
        defer {
            kill(websockify, SIGTERM)
            _ = Bench.wait(websockify)
        }
        guard DesktopBench.waitListening(websockifyPort) else { throw ValidationError("websockify did not listen") }

        var results: [String: (rate: [Double], rtt: [Double])] = [:]
        let sides: [(String, () -> (any RFBTransport)?)] = [
            ("direct", { TCPTransport(port: vncPort) }),
            ("relay", { TCPTransport(port: relay.port) }),
            ("websockify", { BenchWebSocket(port: websockifyPort, path: "/") }),
            ("agent", { BenchWebSocket(port: port, path: "/api/v0/desktop/vnc") }),
        ]
        for _ in 0..<3 {
            for (name, connect) in sides {
                guard let transport = connect(), let session = RFBSession(transport) else { throw ValidationError("\(name): RFB handshake failed") }
                guard let rate = session.fullUpdates(updates), let rtt = session.roundTrips(roundTrips) else {
                    throw ValidationError("\(name): the session broke")
                }
                results[name, default: ([], [])].rate.append(rate)
                results[name, default: ([], [])].rtt.append(rtt)
            }
        }
        func rate(_ name: String) -> Double { Bench.median(results[name]?.rate ?? []) }
        func rtt(_ name: String) -> Double { Bench.median(results[name]?.rtt ?? []) }
        func mibs(_ value: Double) -> String { String(format: "%.0f MiB/s", value / 1048576) }
        report(
            "bridge throughput vs websockify", value: mibs(rate("agent")), baseline: mibs(rate("websockify")),
            ratio: rate("agent") / rate("websockify"), goal: ">= 3x websockify", met: rate("agent") / rate("websockify") >= 3)
        report(
            "bridge throughput vs a TCP relay", value: mibs(rate("agent")), baseline: mibs(rate("relay")),
            ratio: rate("agent") / rate("relay"), goal: ">= 0.7x raw TCP copy", met: rate("agent") / rate("relay") >= 0.7)
        report(
            "direct to Xvnc (information)", value: mibs(rate("direct")), baseline: mibs(rate("relay")),
            ratio: rate("direct") / rate("relay"), goal: "(information)", met: true)
        let added = rtt("agent") - rtt("direct")
        let addedRelay = rtt("relay") - rtt("direct")
        let addedWebsockify = rtt("websockify") - rtt("direct")
        report(
            "1x1 update round trip, added", value: Bench.format(added), baseline: Bench.format(addedWebsockify),
            ratio: added / max(1, addedWebsockify), goal: "reported (baseline: websockify's)", met: true)
        report(
            "  added by the TCP relay (information)", value: Bench.format(addedRelay), baseline: Bench.format(rtt("direct")),
            ratio: addedRelay / max(1, rtt("direct")), goal: "(information: direct RTT)", met: true)

        // Screenshots: the action (HTTP round trip, capture, PNG, base64) against ffmpeg.
        var ours: [Double] = []
        var theirs: [Double] = []
        let scratch = NSTemporaryDirectory() + "agent-bench-shot-\(getpid()).png"
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        for _ in 0..<screenshots {
            var start = Bench.now()
            guard let (status, body) = client.request("POST", "/api/v0/desktop/action", body: #"{"action":"screenshot"}"#), status == 200,
                jsonString(body, "screenshot_data") != nil
            else { throw ValidationError("screenshot failed") }
            ours.append(Double(Bench.now() - start))
            start = Bench.now()
            let ffmpeg = Bench.spawn(
                [
                    "/usr/bin/env", "ffmpeg", "-loglevel", "error", "-f", "x11grab", "-video_size", "1920x1080", "-i", ":\(display)",
                    "-frames:v", "1", "-y", scratch,
                ], stdoutPath: "/dev/null")
            guard Bench.wait(ffmpeg) == 0 else { throw ValidationError("ffmpeg x11grab failed") }
            theirs.append(Double(Bench.now() - start))
        }
        let shot = Bench.median(ours)
        let grab = Bench.median(theirs)
        report(
            "screenshot 1920x1080 -> PNG (median)", value: Bench.format(shot), baseline: Bench.format(grab), ratio: shot / grab,
            goal: "<= 0.2x ffmpeg x11grab", met: shot / grab <= 0.2)
    }
}

/// What the desktop benchmark needs around it.
enum DesktopBench {
    /// The RFB port and display of the Xvnc the agent `pid` started (from /proc).
    static func xvnc(under pid: pid_t) -> (port: Int, display: Int)? {
        for _ in 0..<100 {
            for entry in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [] {
                guard Int32(entry) != nil,
                    let status = try? String(contentsOfFile: "/proc/\(entry)/status", encoding: .utf8),
                    status.contains("PPid:\t\(pid)\n"),
                    let raw = FileManager.default.contents(atPath: "/proc/\(entry)/cmdline")
                else { continue }
                let arguments = raw.split(separator: 0).map { String(decoding: $0, as: UTF8.self) }
                guard arguments.first?.hasSuffix("Xvnc") == true,
                    let index = arguments.firstIndex(of: "-rfbport"), index + 1 < arguments.count,
                    let port = Int(arguments[index + 1]), let display = Int(arguments[1].dropFirst())
                else { continue }
                return (port, display)
            }
            usleep(50_000)
        }
        return nil
    }

    static func waitListening(_ port: Int) -> Bool {
        for _ in 0..<200 {
            if let fd = Bench.connect(port: port) {
                close(fd)
                return true
            }
            usleep(25_000)
        }
        return false
    }
}

/// A byte stream to a VNC server: plain TCP, or the binary frames of a WebSocket.
protocol RFBTransport: AnyObject {
    func write(_ bytes: [UInt8]) -> Bool
    func read(_ count: Int) -> [UInt8]?
}

extension BenchWebSocket: RFBTransport {
    func write(_ bytes: [UInt8]) -> Bool { send(opcode: 0x2, payload: bytes) }
    func read(_ count: Int) -> [UInt8]? { readBinary(count) }
}

final class TCPTransport: RFBTransport {
    private let fd: Int32
    private var buffer: [UInt8] = []
    private var offset = 0

    init?(port: Int) {
        guard let fd = Bench.connect(port: port, noDelay: true) else { return nil }
        self.fd = fd
    }

    deinit { close(fd) }

    func write(_ bytes: [UInt8]) -> Bool { Bench.sendAll(fd, bytes) }

    func read(_ count: Int) -> [UInt8]? {
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while buffer.count - offset < count {
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&pfd, 1, 10_000) > 0 else { return nil }
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            guard n > 0 else { return nil }
            buffer += chunk[0..<n]
        }
        let out = Array(buffer[offset..<(offset + count)])
        offset += count
        if offset > 1 << 20 {
            buffer.removeFirst(offset)
            offset = 0
        }
        return out
    }
}

/// A minimal RFB 3.8 client: no authentication, raw encoding only.
final class RFBSession {
    let transport: any RFBTransport
    let width: Int
    let height: Int
    let bytesPerPixel: Int

    init?(_ transport: any RFBTransport) {
        self.transport = transport
        guard let version = transport.read(12), version.starts(with: Array("RFB 003.".utf8)),
            transport.write(Array("RFB 003.008\n".utf8)),
            let count = transport.read(1), count[0] > 0, let types = transport.read(Int(count[0])), types.contains(1),
            transport.write([1]), let result = transport.read(4), result == [0, 0, 0, 0],
            transport.write([1]), let initMessage = transport.read(24)
        else { return nil }
        width = Int(initMessage[0]) << 8 | Int(initMessage[1])
        height = Int(initMessage[2]) << 8 | Int(initMessage[3])
        bytesPerPixel = Int(initMessage[4]) / 8
        let nameLength = Int(initMessage[20]) << 24 | Int(initMessage[21]) << 16 | Int(initMessage[22]) << 8 | Int(initMessage[23])
        guard transport.read(nameLength) != nil, transport.write([2, 0, 0, 1, 0, 0, 0, 0]) else { return nil }  // SetEncodings: raw
    }

    /// Requests a region (not incremental) and reads the whole update; its byte count.
    func update(x: Int, y: Int, width: Int, height: Int) -> Int? {
        let request: [UInt8] = [
            3, 0, UInt8(x >> 8), UInt8(x & 0xFF), UInt8(y >> 8), UInt8(y & 0xFF),
            UInt8(width >> 8), UInt8(width & 0xFF), UInt8(height >> 8), UInt8(height & 0xFF),
        ]
        guard transport.write(request), let head = transport.read(4), head[0] == 0 else { return nil }
        var total = 4
        for _ in 0..<(Int(head[2]) << 8 | Int(head[3])) {
            guard let rect = transport.read(12) else { return nil }
            let w = Int(rect[4]) << 8 | Int(rect[5])
            let h = Int(rect[6]) << 8 | Int(rect[7])
            let bytes = w * h * bytesPerPixel
            guard transport.read(bytes) != nil else { return nil }
            total += 12 + bytes
        }
        return total
    }

    /// Bytes per second over `count` full-screen updates.
    func fullUpdates(_ count: Int) -> Double? {
        let start = Bench.now()
        var bytes = 0
        for _ in 0..<count {
            guard let n = update(x: 0, y: 0, width: width, height: height) else { return nil }
            bytes += n
        }
        return Double(bytes) / (Double(Bench.now() - start) / 1e9)
    }

    /// Median nanoseconds of a 1×1 update's round trip.
    func roundTrips(_ count: Int) -> Double? {
        var samples: [Double] = []
        for _ in 0..<count {
            let start = Bench.now()
            guard update(x: 0, y: 0, width: 1, height: 1) != nil else { return nil }
            samples.append(Double(Bench.now() - start))
        }
        return Bench.median(samples)
    }
}

/// The "raw TCP copy" baseline: a relay on its own threads copying bytes both ways.
final class TCPRelay: @unchecked Sendable {
    // Safety: `listener` and `port` are set once in init; the accept thread only reads them.
    let port: Int
    private let listener: Int32

    init(target: Int) throws {
        guard let (fd, port) = Bench.listen(backlog: 16) else { throw ValidationError("relay: cannot listen") }
        listener = fd
        self.port = port
        let acceptor = self.listener
        Thread {
            while true {
                let client = accept(acceptor, nil, nil)
                if client < 0 { return }
                guard let server = Bench.connect(port: target, noDelay: true) else {
                    close(client)
                    continue
                }
                var on: Int32 = 1
                setsockopt(client, Int32(IPPROTO_TCP), TCP_NODELAY, &on, socklen_t(MemoryLayout<Int32>.size))
                for (from, to) in [(client, server), (server, client)] {
                    Thread {
                        var buffer = [UInt8](repeating: 0, count: 1 << 16)
                        while true {
                            let n = buffer.withUnsafeMutableBytes { recv(from, $0.baseAddress, $0.count, 0) }
                            if n <= 0 { break }
                            var sent = 0
                            while sent < n {
                                let m = buffer[sent..<n].withUnsafeBytes { send(to, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                                if m <= 0 { break }
                                sent += m
                            }
                        }
                        shutdown(to, Int32(SHUT_WR))
                    }.start()
                }
            }
        }.start()
    }

    func stop() {
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
    }
}
